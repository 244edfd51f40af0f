"""Records a batch needs that Kafka deleted, found from the log start offsets (core/deleted.py)."""

from __future__ import annotations

from airflow_kafka_offsets.core.deleted import DeletedSpan, deleted_spans, planned_refusal, replay_refusal
from airflow_kafka_offsets.core.model import BatchPlan, PartitionOffsets, PartitionRange
from airflow_kafka_offsets.core.model import TopicPartition as TP


def batch(batch_id: int, *ranges: tuple[int, int, int]) -> BatchPlan:
    return BatchPlan("p", batch_id, 1, tuple(PartitionRange("o", part, s, e, s) for part, s, e in ranges), "file:///x")


def test_only_the_deleted_part_of_each_range_is_named_and_empty_or_unlisted_partitions_are_left_alone():
    plan = batch(3, (0, 10, 20), (1, 5, 8), (2, 4, 4), (3, 0, 9))
    offsets = {
        TP("o", 0): PartitionOffsets(15, 40),
        TP("o", 1): PartitionOffsets(9, 9),
        TP("o", 2): PartitionOffsets(6, 9),
    }
    assert deleted_spans(plan, offsets) == (DeletedSpan(TP("o", 0), 10, 15, 15), DeletedSpan(TP("o", 1), 5, 8, 9))
    assert deleted_spans(plan, {TP("o", 0): PartitionOffsets(10, 40)}) == ()


def test_a_replay_refusal_names_every_lost_batch_and_the_ones_still_readable():
    one = {4: (DeletedSpan(TP("o", 0), 10, 15, 15),)}
    assert replay_refusal("p", one, []) == (
        "batch 4 of pipeline 'p' cannot be rebuilt: Kafka no longer holds records it committed (o-0 offsets [10, 15) "
        "(log start is now 15); retention or delete-records removed them). Nothing was started and nothing changed: "
        "the committed output stays as it is, and it is now the only copy of those records, so keep it."
    )
    several = {1: (DeletedSpan(TP("o", 0), 0, 5, 15),), 2: (DeletedSpan(TP("o", 0), 5, 15, 15),)}
    message = replay_refusal("p", several, [3, 4, 5, 7])
    assert message.startswith(
        "batches 1-2 of pipeline 'p' cannot be rebuilt: Kafka no longer holds records it "
        "committed (batch 1: o-0 offsets [0, 5) (log start is now 15); batch 2: o-0 offsets"
    )
    assert message.endswith(
        "Batches 3-5, 7 of the selection are still in Kafka: replay them alone (--batches, or "
        "first/last batch in the form)."
    )
    assert "plan again" not in message and "abort" not in message  # advice for a planned batch has no place here


def test_a_planned_batch_refusal_says_to_abort_and_plan_again():
    message = planned_refusal("p", 9, (DeletedSpan(TP("o", 1), 3, 7, 7),))
    assert message.startswith(
        "batch 9 of pipeline 'p' is planned but Kafka no longer holds records of it (o-1 "
        "offsets [3, 7) (log start is now 7);"
    )
    assert "Abort the batch ('abort' operation) and let the next run plan again" in message
