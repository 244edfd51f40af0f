"""Pure planning: from cursors, Kafka's offsets and a pipeline spec to the next batch's ranges.

No I/O here, so every rule can be tested by the hundred. The ledger and the
Kafka client feed this module; nothing in it talks to either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_kafka_offsets.core.model import (
    DataLossPolicy,
    PartitionOffsets,
    PartitionRange,
    PipelineSpec,
    StartPolicy,
    TopicPartition,
)
from airflow_kafka_offsets.errors import (
    DataLossError,
    NoStartingOffsetError,
    OffsetOutOfRangeError,
    PartitionVanishedError,
    UnknownTopicError,
)


def fair_shares(needs: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` over ``needs`` max-min fairly (water-filling), deterministically.

    Small needs are met in full; what is left is shared equally by the rest, so
    one busy partition cannot starve the others under a total cap.
    """
    shares = [0] * len(needs)
    remaining = max(budget, 0)
    order = sorted(range(len(needs)), key=lambda i: (needs[i], i))
    for left, index in zip(range(len(order), 0, -1), order):
        share = min(needs[index], remaining // left)
        shares[index] = share
        remaining -= share
    return shares


def _start_offset(
    tp: TopicPartition,
    cursor: int | None,
    offsets: PartitionOffsets,
    policy: StartPolicy,
    pipeline: str,
) -> int:
    if cursor is not None:
        return cursor
    if policy is StartPolicy.EARLIEST:
        return offsets.earliest
    if policy is StartPolicy.LATEST:
        return offsets.latest
    raise NoStartingOffsetError(
        f"pipeline {pipeline!r} has no cursor for {tp} and its policy is 'error': "
        "reset the pipeline's offsets for this partition or choose 'earliest' or 'latest'"
    )


def plan_ranges(
    spec: PipelineSpec,
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
) -> tuple[PartitionRange, ...]:
    """The ranges of the next batch, one per partition of the spec's topics (possibly empty).

    ``cursors`` are the committed next offsets; ``offsets`` Kafka's current log
    start and last stable offsets. Raises on data loss (unless skipping is
    allowed), on cursors beyond the log end, and on vanished topics or partitions.
    """
    topics = set(spec.topics)
    present = {tp.topic for tp in offsets}
    missing_topics = sorted(topics - present)
    if missing_topics:
        raise UnknownTopicError(f"pipeline {spec.name!r}: topic(s) {', '.join(missing_topics)} not found in Kafka")
    # Keyed by plain (topic, partition) tuples, which hash, compare and sort in C: TopicPartition does
    # all three in Python, a cost that shows at thousands of partitions.
    kafka_at = {(tp.topic, tp.partition): (tp, kafka) for tp, kafka in offsets.items() if tp.topic in topics}
    cursor_at = {(tp.topic, tp.partition): offset for tp, offset in cursors.items()}
    vanished = sorted(tp for tp in cursors if tp.topic in topics and (tp.topic, tp.partition) not in kafka_at)
    if vanished:
        raise PartitionVanishedError(
            f"pipeline {spec.name!r}: partition(s) {', '.join(map(str, vanished))} have cursors but no longer "
            "exist in Kafka (topic recreated with fewer partitions?); reset the pipeline to continue"
        )

    first_batch = not any(tp.topic in topics for tp in cursors)
    policy = spec.starting_offsets if first_batch else spec.new_partition_offsets
    lost: list[str] = []
    beyond: list[str] = []
    starts: list[tuple[TopicPartition, int, int, int]] = []  # (tp, cursor, start, latest) in partition order
    for key in sorted(kafka_at):
        tp, kafka = kafka_at[key]
        start = _start_offset(tp, cursor_at.get(key), kafka, policy, spec.name)
        if start < kafka.earliest:
            lost.append(f"{tp} offsets [{start}, {kafka.earliest}) ({kafka.earliest - start} records)")
            if spec.on_data_loss is DataLossPolicy.SKIP:
                starts.append((tp, start, kafka.earliest, kafka.latest))
                continue
        elif start > kafka.latest:
            beyond.append(f"{tp} cursor {start} > latest offset {kafka.latest}")
        starts.append((tp, start, start, kafka.latest))

    if beyond:
        raise OffsetOutOfRangeError(
            f"pipeline {spec.name!r}: cursor beyond the end of the log for {'; '.join(beyond)}. "
            "The topic was probably deleted and recreated; reset the pipeline's offsets to continue"
        )
    if lost and spec.on_data_loss is DataLossPolicy.FAIL:
        raise DataLossError(
            f"pipeline {spec.name!r}: retention deleted records not yet ingested: {'; '.join(lost)}. "
            "Nothing was ingested. Set on_data_loss='skip' to record the gap and continue, or reset the offsets"
        )

    needs = [max(latest - start, 0) for _, _, start, latest in starts]
    if spec.max_records_per_partition is not None:
        needs = [min(n, spec.max_records_per_partition) for n in needs]
    if spec.max_records_per_batch is not None:
        needs = fair_shares(needs, spec.max_records_per_batch)
    return tuple(
        PartitionRange(tp.topic, tp.partition, start, start + need, cursor)  # start, end, cursor
        for (tp, cursor, start, _), need in zip(starts, needs)
    )


def has_work(ranges: Sequence[PartitionRange], cursors: Mapping[TopicPartition, int]) -> bool:
    """A batch is worth planning when it reads records, skips lost ones, or starts tracking a partition."""
    return any(r.span > 0 or r.lost > 0 or r.topic_partition not in cursors for r in ranges)


def new_partitions(
    ranges: Sequence[PartitionRange], cursors: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Cursors to create for partitions the ranges cover for the first time: each starts at its range's start."""
    known = {(tp.topic, tp.partition) for tp in cursors}  # plain tuples: hashed in C, unlike TopicPartition
    return {r.topic_partition: r.start for r in ranges if (r.topic, r.partition) not in known}


def partition_lag(cursor: int | None, offsets: PartitionOffsets) -> int:
    """Offsets not yet ingested: from the cursor (or, without one, the log start) to the last stable offset."""
    return max(offsets.latest - (offsets.earliest if cursor is None else cursor), 0)
