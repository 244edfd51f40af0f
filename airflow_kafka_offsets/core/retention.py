"""How long until Kafka's retention may delete a pipeline's oldest unread record: pure, no I/O.

Kafka deletes a log segment by time once its newest record is ``retention.ms`` old, so the segment
holding the oldest unread record (timestamp *t*) cannot go before *t* + ``retention.ms``: that is
the earliest moment it may be lost. ``retention.bytes`` deletes by size instead, which no single
look predicts; its effect is the log start offset moving forward, so where the log start has been
seen moving, the time for it to reach the cursor at its observed pace is the other bound. The
smaller bound counts. This warns before the loss: ``on_data_loss`` only reports it afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition

# Kafka's value of retention.ms / retention.bytes for "no limit".
UNLIMITED = -1


@dataclass(frozen=True)
class TopicRetention:
    """A topic's deletion settings as Kafka reports them (``describe_configs``); None: no limit."""

    retention_ms: int | None
    retention_bytes: int | None
    deletes: bool = True  # cleanup.policy includes "delete" (a compact-only topic never deletes by age)

    @classmethod
    def from_configs(cls, configs: Mapping[str, str | None]) -> TopicRetention:
        """From the topic's config values (strings, as the admin API gives them)."""

        def limit(key: str) -> int | None:
            value = configs.get(key)
            return None if value is None or int(value) == UNLIMITED else int(value)

        policy = configs.get("cleanup.policy") or "delete"
        return cls(limit("retention.ms"), limit("retention.bytes"), "delete" in policy.split(","))


@dataclass(frozen=True)
class LogStartPace:
    """Where a partition's log start offset was first seen, and when (to measure how fast it moves)."""

    offset: int
    at: datetime

    def offsets_per_s(self, now_offset: int, now: datetime) -> float | None:
        """The log start's average pace since then; None while it has not moved."""
        elapsed = (now - self.at).total_seconds()
        if now_offset <= self.offset or elapsed <= 0:
            return None
        return (now_offset - self.offset) / elapsed


def seconds_until_deletable(
    cursor: int | None,
    offsets: PartitionOffsets,
    oldest_unread: datetime | None,
    retention: TopicRetention | None,
    now: datetime,
    log_start_pace: float | None = None,
) -> float | None:
    """Seconds until retention may delete the oldest unread record at ``cursor`` (None: no cursor, the
    log start). 0: it may be deleted now, or already was (the cursor is below the log start). None:
    nothing is unread, or nothing bounds it (no time limit or no timestamp, and no observed pace)."""
    position = offsets.earliest if cursor is None else cursor
    if position >= offsets.latest:
        return None
    if position < offsets.earliest:
        return 0.0
    bounds: list[float] = []
    if retention is not None and retention.deletes:
        if retention.retention_ms is not None and oldest_unread is not None:
            bounds.append(oldest_unread.timestamp() + retention.retention_ms / 1000 - now.timestamp())
    if log_start_pace:
        bounds.append((position - offsets.earliest) / log_start_pace)
    return max(min(bounds), 0.0) if bounds else None


@dataclass(frozen=True)
class PartitionRisk:
    """A partition whose oldest unread record retention may delete within the warning window."""

    topic_partition: TopicPartition
    cursor: int
    log_start: int
    deletable_in_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic_partition.topic,
            "partition": self.topic_partition.partition,
            "cursor": self.cursor,
            "log_start_offset": self.log_start,
            "deletable_in_s": round(self.deletable_in_s, 3),
        }


def at_risk(
    positions: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    deletable_in: Mapping[TopicPartition, float | None],
    within_s: float,
) -> tuple[PartitionRisk, ...]:
    """The partitions retention may reach within ``within_s`` seconds, soonest first."""
    risks = [
        PartitionRisk(tp, positions[tp], offsets[tp].earliest, seconds)
        for tp, seconds in deletable_in.items()
        if seconds is not None and seconds <= within_s and tp in positions and tp in offsets
    ]
    return tuple(sorted(risks, key=lambda r: (r.deletable_in_s, r.topic_partition)))


def warning(pipeline: str, risks: tuple[PartitionRisk, ...], within_s: float) -> str:
    """The warning in words: the soonest partition first."""
    soonest = risks[0]
    more = f" and {len(risks) - 1} more partition(s)" if len(risks) > 1 else ""
    return (
        f"retention may delete unread records of pipeline {pipeline!r} in {soonest.deletable_in_s:.0f}s: "
        f"{soonest.topic_partition} from offset {soonest.cursor}{more} (warning at {within_s:.0f}s); "
        "ingest now, or raise the topic's retention"
    )
