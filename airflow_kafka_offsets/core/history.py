"""A pipeline's lag and batches over time, shaped for charts from the ledger's committed batches (pure).

The ledger keeps no metrics; everything here follows from its batch rows:

- **lag in records** when batch k was planned is the offsets its plan covered, from the cursor to
  the ends it took (Kafka's last stable offset then, unless the pipeline caps a batch's size: then
  the lag was at least that). The newest point is the lag now, from Kafka.
- **age of the oldest unread record**, at most: a batch planned at time p reads every record
  produced before p, so once it commits, no record older than ``now - p`` is unread. The series
  rises with time and drops at each commit (the saw-tooth of a scheduled pipeline).
- **per batch**: the records and payload bytes it committed, and its seconds from plan to commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

RANGES: dict[str, int] = {"hour": 3600, "day": 86400, "week": 7 * 86400}
DEFAULT_RANGE = "day"
MAX_BATCHES = 1000  # the newest batches of a range a chart draws


@dataclass(frozen=True)
class BatchPoint:
    """A committed batch as the charts see it (one row of the ledger's history)."""

    batch_id: int
    kind: str  # ingest or reset
    planned_at: datetime
    committed_at: datetime
    records: int
    payload_bytes: int
    offsets_planned: int  # sum over partitions of end - cursor


@dataclass(frozen=True)
class Point:
    """One point of a series: when, the value, and the batch it comes from (None: looked up now).

    ``since``: the start of the span the value covers (a batch's plan, ``at`` its commit), for a bar
    drawn as wide as the batch took; None for an instant.
    """

    at: datetime
    value: float
    batch_id: int | None
    since: datetime | None = None


class PipelineState(Enum):
    HEALTHY = "healthy"
    LAGGING = "lagging"
    FAILING = "failing"
    DATA_AT_RISK = "data at risk"


def unknown_range(name: str | None) -> str | None:
    """What is wrong with a range's name, naming the valid ones; None for a known name or none given."""
    if name is None or name in RANGES:
        return None
    return f"unknown range {name!r}: choose one of {', '.join(RANGES)} (shown: the last {DEFAULT_RANGE})"


def range_seconds(name: str | None) -> tuple[str, int]:
    """The range a chart shows by its name (hour, day, week); an unknown or missing name is a day."""
    key = name if name in RANGES else DEFAULT_RANGE
    return key, RANGES[key]


def ingest(points: Sequence[BatchPoint]) -> list[BatchPoint]:
    """The batches that read records (a reset moves the cursor and reads nothing)."""
    return [p for p in points if p.kind == "ingest"]


def lag_records(points: Sequence[BatchPoint], now: datetime, lag_now: int | None) -> list[Point]:
    """Lag in records when each ingest batch was planned, then now (when Kafka answered)."""
    series = [Point(p.planned_at, p.offsets_planned, p.batch_id) for p in ingest(points)]
    if lag_now is not None:
        series.append(Point(now, lag_now, None))
    return series


def lag_age(points: Sequence[BatchPoint], now: datetime) -> list[Point]:
    """The age of the oldest unread record, at most, at each commit (just before, just after) and now.

    Before the first batch of the range the bound is unknown, so the series starts at its first commit.
    """
    series: list[Point] = []
    previous: BatchPoint | None = None
    for p in ingest(points):
        if previous is not None:
            series.append(Point(p.committed_at, _seconds(p.committed_at, previous.planned_at), p.batch_id))
        series.append(Point(p.committed_at, _seconds(p.committed_at, p.planned_at), p.batch_id))
        previous = p
    if previous is not None:
        series.append(Point(now, _seconds(now, previous.planned_at), None))
    return series


def per_batch(points: Sequence[BatchPoint]) -> dict[str, list[Point]]:
    """Records, payload bytes and seconds from plan to commit of each ingest batch, at its commit
    (spanning from its plan)."""
    batches = ingest(points)
    return {
        "records": [Point(p.committed_at, p.records, p.batch_id, p.planned_at) for p in batches],
        "bytes": [Point(p.committed_at, p.payload_bytes, p.batch_id, p.planned_at) for p in batches],
        "seconds": [
            Point(p.committed_at, _seconds(p.committed_at, p.planned_at), p.batch_id, p.planned_at) for p in batches
        ],
    }


def _seconds(later: datetime, earlier: datetime) -> float:
    return max(0.0, round((later - earlier).total_seconds(), 3))


def state(
    *,
    lost_partitions: int,
    failing_attempts: int,
    lag_records: int | None,
    age_bound_s: float | None,
    lagging_after_s: float,
) -> PipelineState:
    """One word for a pipeline, the worst that applies.

    - data at risk: unread records are already gone (a cursor below Kafka's log start offset);
    - failing: the batch in flight has a failed or dead Spark attempt;
    - lagging: records are unread and the oldest may be older than ``lagging_after_s``;
    - healthy otherwise.
    """
    if lost_partitions:
        return PipelineState.DATA_AT_RISK
    if failing_attempts:
        return PipelineState.FAILING
    if lag_records and (age_bound_s is None or age_bound_s > lagging_after_s):
        return PipelineState.LAGGING
    return PipelineState.HEALTHY


@dataclass(frozen=True)
class Scale:
    """A linear map from [low, high] onto [0, pixels] (a flat range maps onto the middle)."""

    low: float
    high: float
    pixels: float

    @classmethod
    def of(cls, values: Sequence[float], pixels: float, zero: bool = True) -> Scale:
        """The scale of ``values``, from 0 when ``zero`` (counts and ages start at zero)."""
        low = min([0.0, *values] if zero else values, default=0.0)
        high = max(values, default=0.0)
        return cls(low, high, pixels)

    def __call__(self, value: float) -> float:
        if self.high == self.low:
            return self.pixels / 2 if self.high else 0.0
        return round((value - self.low) / (self.high - self.low) * self.pixels, 1)
