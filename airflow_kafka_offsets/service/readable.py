"""Before a Spark job reads a batch: are its records still in Kafka? (the log start offsets, one look-up)

A replay of a committed batch whose records retention deleted, or the read of a planned batch
whose records went before it was read, is refused here with one message for that case, before any
attempt is recorded or any JVM starts; Spark would find the same thing minutes later, in hundreds of
lines of its log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from airflow_kafka_offsets.core.deleted import deleted_spans, planned_refusal, replay_refusal
from airflow_kafka_offsets.core.model import BatchPlan, PartitionOffsets, TopicPartition
from airflow_kafka_offsets.errors import RecordsDeletedError
from airflow_kafka_offsets.ledger.port import LedgerPort

log = logging.getLogger(__name__)

# Kafka's offsets of the partitions of some topics (``KafkaOffsetsClient.offsets``).
OffsetsSource = Callable[[Sequence[str]], Mapping[TopicPartition, PartitionOffsets]]


def refuse_deleted_replay(
    ledger: LedgerPort, offsets_source: OffsetsSource, pipeline: str, batch_ids: Sequence[int]
) -> None:
    """Raise :class:`RecordsDeletedError` when Kafka no longer holds records of any of these committed
    batches; nothing is started for any of them then (the others are named, to replay alone)."""
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
        plans = [tx.batch(pipeline, b).plan for b in batch_ids]
    offsets = offsets_source(spec.topics)
    lost = {p.batch_id: spans for p in plans if (spans := deleted_spans(p, offsets))}
    if lost:
        readable = [p.batch_id for p in plans if p.batch_id not in lost]
        raise RecordsDeletedError(replay_refusal(pipeline, lost, readable))
    log.debug(
        "pipeline %s: the records of batch%s %s are all still in Kafka",
        pipeline,
        "es" if len(batch_ids) > 1 else "",
        ", ".join(map(str, batch_ids)),
    )


def refuse_deleted_plan(plan: BatchPlan, offsets_source: OffsetsSource) -> None:
    """Raise :class:`RecordsDeletedError` when Kafka no longer holds records of the planned batch ``plan``."""
    spans = deleted_spans(plan, offsets_source(sorted({r.topic for r in plan.readable_ranges})))
    if spans:
        raise RecordsDeletedError(planned_refusal(plan.pipeline, plan.batch_id, spans))
