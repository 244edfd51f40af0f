"""Pure planning of offset resets, with the modes of ``kafka-consumer-groups --reset-offsets``.

A reset never loses track of an offset: moving forward records the skipped
span, moving back starts a new epoch whose ranges may cover the rewound span
again (see :mod:`airflow_kafka_offsets.ledger`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from airflow_kafka_offsets.core.model import PartitionOffsets, PartitionRange, PipelineSpec, TopicPartition
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


class ResetMode(str, Enum):
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_DATETIME = "to-datetime"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"

    @property
    def takes_value(self) -> bool:
        """to-offset and shift-by take a number, to-datetime a timestamp."""
        return self not in (ResetMode.TO_EARLIEST, ResetMode.TO_LATEST)


class ResetError(InvalidPipelineSpecError):
    """A reset request that cannot be applied as given."""


@dataclass(frozen=True)
class ResetRequest:
    mode: ResetMode
    offset: int | None = None  # to-offset target or shift-by delta
    timestamp: datetime | None = None  # to-datetime
    topic: str | None = None  # None: every topic of the pipeline
    partitions: tuple[int, ...] | None = None  # None: every partition of the selected topic(s)


@dataclass(frozen=True, order=True)
class PartitionReset:
    topic: str
    partition: int
    before: int | None  # None: the pipeline never had a cursor here
    after: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def change(self) -> str:
        if self.before is None:
            return "start"
        if self.after > self.before:
            return f"skip {self.after - self.before}"
        if self.after < self.before:
            return f"rewind {self.before - self.after}"
        return "unchanged"


def parse_datetime(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise ResetError(f"malformed timestamp {value!r}: use ISO 8601, e.g. 2026-11-21T08:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def select_partitions(
    spec: PipelineSpec, offsets: Mapping[TopicPartition, PartitionOffsets], request: ResetRequest
) -> list[TopicPartition]:
    if request.topic is not None and request.topic not in spec.topics:
        raise ResetError(f"topic {request.topic!r} is not part of pipeline {spec.name!r} ({', '.join(spec.topics)})")
    topics = [request.topic] if request.topic else list(spec.topics)
    available = sorted(tp for tp in offsets if tp.topic in topics)
    if request.partitions is None:
        selected = available
    else:
        selected = [tp for tp in available if tp.partition in request.partitions]
        known = {tp.partition for tp in selected}
        missing = [p for p in request.partitions if p not in known]
        if missing:
            raise ResetError(f"partition(s) {missing} do not exist in {', '.join(topics)}")
    if not selected:
        raise ResetError(f"the reset selects no partition of pipeline {spec.name!r}")
    return selected


def plan_reset(
    spec: PipelineSpec,
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    request: ResetRequest,
    offsets_at_time: Mapping[TopicPartition, int | None] | None = None,
) -> tuple[PartitionReset, ...]:
    """New cursors for the selected partitions.

    ``offsets_at_time`` (to-datetime) maps each partition to the first offset
    with a timestamp at or after the requested time, None when there is none
    (the reset then goes to the end, as Kafka's tool does).
    """
    resets = []
    for tp in select_partitions(spec, offsets, request):
        kafka = offsets[tp]
        before = cursors.get(tp)
        if request.mode is ResetMode.TO_EARLIEST:
            after = kafka.earliest
        elif request.mode is ResetMode.TO_LATEST:
            after = kafka.latest
        elif request.mode is ResetMode.TO_DATETIME:
            found = (offsets_at_time or {}).get(tp)
            after = kafka.latest if found is None or found < 0 else found
        elif request.mode is ResetMode.TO_OFFSET:
            after = int(request.offset)  # type: ignore[arg-type]
            if not kafka.earliest <= after <= kafka.latest:
                raise ResetError(
                    f"offset {after} is out of range for {tp}: Kafka holds [{kafka.earliest}, {kafka.latest})"
                )
        else:
            base = before if before is not None else kafka.latest
            # Like kafka-consumer-groups: shifting past either end stops at that end.
            after = min(max(base + int(request.offset), kafka.earliest), kafka.latest)  # type: ignore[arg-type]
        resets.append(PartitionReset(tp.topic, tp.partition, before, max(after, kafka.earliest)))
    return tuple(resets)


def is_rewind(resets: Sequence[PartitionReset]) -> bool:
    return any(r.before is not None and r.after < r.before for r in resets)


def reset_ranges(
    resets: Sequence[PartitionReset], cursors: Mapping[TopicPartition, int], new_epoch: bool
) -> tuple[tuple[PartitionRange, int | None], ...]:
    """The zero-width ranges a reset batch records, each with the cursor it replaces.

    Moving forward records ``[before, after)`` as skipped (cursor < start).
    A rewind opens a new epoch, so its batch marks where every partition starts
    in that epoch, unchanged ones included.
    """
    by_tp = {r.topic_partition: r for r in resets}
    if new_epoch:
        chosen = sorted(set(cursors) | set(by_tp))
    else:
        chosen = sorted(tp for tp, r in by_tp.items() if r.before != r.after)
    entries = []
    for tp in chosen:
        before = cursors.get(tp)
        after = by_tp[tp].after if tp in by_tp else before
        assert after is not None
        cursor = before if before is not None and before < after else after
        entries.append((PartitionRange(tp.topic, tp.partition, start=after, end=after, cursor=cursor), before))
    return tuple(entries)
