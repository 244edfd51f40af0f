"""Records a batch needs that Kafka no longer holds, found from the log start offsets before Spark runs.

Spark's Kafka source finds the same thing only after a JVM has started, and says it in hundreds of
lines of log; comparing a batch's ranges with each partition's log start offset says it at once,
and lets the message fit the case: a committed batch cannot be rebuilt (its records are gone for
good), a planned batch can be aborted and planned again. Pure: values in, messages out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from airflow_kafka_offsets.core.model import BatchPlan, PartitionOffsets, TopicPartition


@dataclass(frozen=True)
class DeletedSpan:
    """Offsets ``[start, end)`` of a batch's range that lie below the partition's log start offset."""

    topic_partition: TopicPartition
    start: int
    end: int
    log_start: int

    def describe(self) -> str:
        return f"{self.topic_partition} offsets [{self.start}, {self.end}) (log start is now {self.log_start})"


def deleted_spans(plan: BatchPlan, offsets: Mapping[TopicPartition, PartitionOffsets]) -> tuple[DeletedSpan, ...]:
    """The parts of ``plan``'s readable ranges Kafka has deleted; empty when every record is still there.

    A partition Kafka does not list is left to the read (it fails naming the partition)."""
    spans = []
    for r in plan.readable_ranges:
        bounds = offsets.get(r.topic_partition)
        if bounds is not None and r.start < bounds.earliest:
            spans.append(DeletedSpan(r.topic_partition, r.start, min(r.end, bounds.earliest), bounds.earliest))
    return tuple(spans)


def _listed(spans: Iterable[DeletedSpan]) -> str:
    return "; ".join(s.describe() for s in spans)


def _batch_numbers(ids: Sequence[int]) -> str:
    """``[2, 3, 4, 7]`` -> ``2-4, 7``."""
    runs: list[tuple[int, int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def replay_refusal(pipeline: str, lost: Mapping[int, Sequence[DeletedSpan]], readable: Sequence[int]) -> str:
    """Why a replay of committed batches is refused, and what the user can do instead.

    ``lost``: the selected batches whose records Kafka deleted (by batch number); ``readable``: the
    selected batches whose records are all still there."""
    ids = sorted(lost)
    head = (
        f"batch {ids[0]} of pipeline {pipeline!r} cannot be rebuilt"
        if len(ids) == 1
        else f"batches {_batch_numbers(ids)} of pipeline {pipeline!r} cannot be rebuilt"
    )
    gone = "; ".join(f"batch {i}: {_listed(lost[i])}" for i in ids) if len(ids) > 1 else _listed(lost[ids[0]])
    then = (
        f" Batches {_batch_numbers(readable)} of the selection are still in Kafka: replay them alone"
        f" (--batches, or first/last batch in the form)."
        if readable
        else ""
    )
    return (
        f"{head}: Kafka no longer holds records it committed ({gone}; retention or delete-records removed them). "
        "Nothing was started and nothing changed: the committed output stays as it is, and it is now the only "
        f"copy of those records, so keep it.{then}"
    )


def planned_refusal(pipeline: str, batch_id: int, spans: Sequence[DeletedSpan]) -> str:
    """Why a planned batch cannot be read, and the way out (its records are gone before it was read)."""
    return (
        f"batch {batch_id} of pipeline {pipeline!r} is planned but Kafka no longer holds records of it "
        f"({_listed(spans)}; retention or delete-records removed them before it was read). No Spark job was "
        "started. Abort the batch ('abort' operation) and let the next run plan again: planning then fails on "
        "the deleted span unless the pipeline's on_data_loss is 'skip', which records the span as skipped"
    )
