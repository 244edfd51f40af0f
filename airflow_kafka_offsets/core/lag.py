"""When a pipeline's lag should start an ingest run: pure decisions from the ledger's cursors,
Kafka's offsets and the timestamps of the oldest unread records (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.core.planner import partition_lag
from airflow_kafka_offsets.core.values import optional_int
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


def seconds(value: object, what: str) -> float | None:
    """A duration given as seconds or a timedelta, as positive seconds (None stays None)."""
    if value is None:
        return None
    number = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(number, bool) or not isinstance(number, int | float) or not number > 0:
        raise InvalidPipelineSpecError(f"{what} must be a positive number of seconds or a timedelta, got {value!r}")
    return float(number)


@dataclass(frozen=True)
class LagThresholds:
    """Fire at ``records`` unread records or more, or once the oldest unread record is ``age_s``
    seconds old; at least one of the two."""

    records: int | None = None
    age_s: float | None = None

    @classmethod
    def of(cls, max_lag_records: object, max_lag_age: object) -> LagThresholds:
        """From user input: a positive whole number of records, a positive duration (seconds or timedelta)."""
        records = optional_int(max_lag_records, "max_lag_records", minimum=1)
        age_s = seconds(max_lag_age, "max_lag_age")
        if records is None and age_s is None:
            raise InvalidPipelineSpecError(
                "the lag trigger needs max_lag_records, max_lag_age or both: without a threshold it never fires"
            )
        return cls(records, age_s)


@dataclass(frozen=True)
class LagDecision:
    """Whether to fire, why (in words), and the lag it was decided on."""

    fire: bool
    reason: str
    lag_records: int
    oldest_unread_age_s: float | None

    @property
    def brief(self) -> tuple[bool, int]:
        """What changes the decision's meaning (its reason also holds the age, new at every look)."""
        return self.fire, self.lag_records

    def payload(self, pipeline: str, thresholds: LagThresholds) -> dict[str, Any]:
        """The trigger event's payload (JSON), which Airflow stores in the asset event's extra."""
        return {
            "pipeline": pipeline,
            "reason": self.reason,
            "lag_records": self.lag_records,
            "oldest_unread_age_s": self.oldest_unread_age_s,
            "max_lag_records": thresholds.records,
            "max_lag_age_s": thresholds.age_s,
        }


@dataclass(frozen=True)
class Fired:
    """Where the pipeline was to read next (:func:`read_positions`) when the trigger last fired, and when."""

    positions: Mapping[TopicPartition, int]
    at: datetime


def read_positions(
    cursors: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, PartitionOffsets]
) -> dict[TopicPartition, int]:
    """Where the pipeline reads next in each partition: its cursor, or the log start without one
    (so the cursors a new pipeline's first plan writes at the log start change nothing)."""
    return {tp: cursors.get(tp, off.earliest) for tp, off in offsets.items()}


def unread_positions(
    cursors: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, PartitionOffsets]
) -> dict[TopicPartition, int]:
    """Where each lagging partition's oldest unread record is: the read position, or the log start
    when retention removed the records there."""
    return {
        tp: max(position, offsets[tp].earliest)
        for tp, position in read_positions(cursors, offsets).items()
        if partition_lag(cursors.get(tp), offsets[tp]) > 0
    }


def timestamps_needed(
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    thresholds: LagThresholds,
) -> dict[TopicPartition, int]:
    """The positions whose record timestamps the decision needs: none without an age threshold or
    when the record threshold is reached anyway."""
    if thresholds.age_s is None:
        return {}
    if thresholds.records is not None and total_lag(cursors, offsets) >= thresholds.records:
        return {}
    return unread_positions(cursors, offsets)


def total_lag(cursors: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, PartitionOffsets]) -> int:
    return sum(partition_lag(cursors.get(tp), off) for tp, off in offsets.items())


def holding(
    fired: Fired | None, positions: Mapping[TopicPartition, int], now: datetime, rearm_after_s: float
) -> str | None:
    """Why not to fire again yet (None: free to fire): the run the last event started has not
    committed a batch (the read positions have not moved) and ``rearm_after_s`` has not passed since."""
    if fired is None or dict(positions) != dict(fired.positions):
        return None
    rearm = fired.at + timedelta(seconds=rearm_after_s)
    if now >= rearm:
        return None
    return f"fired at {fired.at:%H:%M:%S} UTC; no batch committed since, fires again from {rearm:%H:%M:%S} UTC"


def decide(
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    oldest_unread: Mapping[TopicPartition, datetime | None],
    thresholds: LagThresholds,
    now: datetime,
) -> LagDecision:
    """Fire when the unread records reach ``thresholds.records`` or the oldest of them (by its Kafka
    timestamp) is ``thresholds.age_s`` old. Lag counts offsets from the cursor (or the log start)
    to the last stable offset, over every partition of ``offsets``; a partition without a known
    timestamp does not count towards the age."""
    lag = total_lag(cursors, offsets)
    lagging = unread_positions(cursors, offsets)
    seen = [ts for tp, ts in oldest_unread.items() if tp in lagging and ts is not None]
    age = max((now - min(seen)).total_seconds(), 0.0) if seen else None
    if thresholds.records is not None and lag >= thresholds.records:
        return LagDecision(True, f"lag {lag} records >= max_lag_records {thresholds.records}", lag, age)
    if thresholds.age_s is not None and age is not None and age >= thresholds.age_s:
        return LagDecision(
            True, f"oldest unread record {int(age)}s old >= max_lag_age {thresholds.age_s:g}s ({lag} records)", lag, age
        )
    below = [f"lag {lag} records" + (f" < {thresholds.records}" if thresholds.records is not None else "")]
    if thresholds.age_s is not None:
        if age is not None:
            below.append(f"oldest unread record {int(age)}s old < {thresholds.age_s:g}s")
        else:
            below.append("age of the oldest unread record unknown" if lag else "no unread record")
    return LagDecision(False, ", ".join(below), lag, age)
