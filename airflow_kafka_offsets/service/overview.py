"""What the "Kafka pipelines" page shows: every pipeline's cursors, lag, batches and attempts.

Reads the ledger in read-only transactions, through the same ledger calls, rows and status model
(service/status.py) as the ``status`` operation, and asks Kafka for end offsets. Bounded for large
ledgers: pipelines and partitions come a page at a time, batches as the newest few (index-backed),
and lag in time (and the time left before retention may delete unread records) is looked up only
for the partitions on the page. The charts' series come from the ledger's committed batches
(:mod:`airflow_kafka_offsets.core.history`): the newest ``MAX_BATCHES`` of the range shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from airflow_kafka_offsets.core import history
from airflow_kafka_offsets.core.history import BatchPoint, PipelineState, Point
from airflow_kafka_offsets.core.lag import total_lag
from airflow_kafka_offsets.core.model import PartitionOffsets, PartitionRange, TopicPartition
from airflow_kafka_offsets.core.retention import TopicRetention
from airflow_kafka_offsets.errors import KafkaOffsetsError, KafkaUnavailableError, PipelineNotFoundError
from airflow_kafka_offsets.ledger import Ledger, LedgerTransaction
from airflow_kafka_offsets.service.status import (
    PartitionStatus,
    attempt_status,
    batch_status,
    lagging_cursors,
    partition_statuses,
    shown_partitions,
)

PIPELINES_PER_PAGE = 50
PARTITIONS_PER_PAGE = 100
RECENT_BATCHES = 10
RANGES_SHOWN = 20
TREND_S = 86400  # the overview's lag trend: the last day
LAGGING_AFTER_S = 900.0  # a pipeline whose oldest unread record may be older than this is lagging


class KafkaPositions(Protocol):
    """What the page asks Kafka (clients.kafka.KafkaOffsetsClient answers it)."""

    def offsets(self, topics: Sequence[str]) -> dict[TopicPartition, PartitionOffsets]: ...

    def timestamps_at(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, datetime | None]: ...

    def retention(self, topics: Sequence[str]) -> dict[str, TopicRetention]: ...


@dataclass(frozen=True)
class PipelineSummary:
    """One line of the overview."""

    name: str
    topics: tuple[str, ...]
    partitions: int
    lag_records: int | None
    kafka_error: str | None
    in_flight: dict[str, Any] | None
    last_batch: dict[str, Any] | None
    dead_attempts: int
    state: PipelineState
    lag_trend: tuple[Point, ...]  # lag in records over the last day (TREND_S) up to ``now``
    now: datetime


@dataclass(frozen=True)
class History:
    """The charts of one pipeline over a range (hour, day, week) ending now."""

    range: str
    start: datetime
    now: datetime
    lag_records: tuple[Point, ...]
    lag_age: tuple[Point, ...]
    records: tuple[Point, ...]
    bytes: tuple[Point, ...]
    seconds: tuple[Point, ...]


@dataclass(frozen=True)
class BatchLine:
    """A recent batch with (the first few of) its ranges."""

    batch: dict[str, Any]
    ranges: tuple[PartitionRange, ...]
    ranges_total: int


@dataclass(frozen=True)
class PipelineDetail:
    summary: PipelineSummary
    partitions: tuple[PartitionStatus, ...]
    page: int
    pages: int
    batches: tuple[BatchLine, ...]
    attempts: tuple[dict[str, Any], ...]
    history: History


@dataclass(frozen=True)
class Overview:
    pipelines: tuple[PipelineSummary, ...]
    page: int
    pages: int
    total: int


@dataclass(frozen=True)
class _LedgerView:
    """What one read-only transaction read about one pipeline."""

    name: str
    topics: tuple[str, ...]
    cursors: dict[TopicPartition, int]
    in_flight: dict[str, Any] | None
    batches: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    history: list[BatchPoint]  # committed batches of the range read, oldest first


def _pages(total: int, per_page: int) -> int:
    return max(1, -(-total // per_page))


def _ledger_exists(tx: LedgerTransaction) -> bool:
    """Whether the ledger's tables exist (the page never creates them: it only reads)."""
    return tx.table_exists("pipelines")


def _read(tx: LedgerTransaction, pipeline: str, since: datetime) -> _LedgerView:
    spec = tx.pipeline_spec(pipeline)
    batches = [batch_status(b) for b in tx.recent_batches(pipeline, RECENT_BATCHES)]
    # A planned batch is the newest one: nothing is planned or reset after it until it ends.
    planned = [b for b in batches if b["state"] == "planned"]
    attempts = [attempt_status(a) for a in tx.attempts(pipeline, [b["batch_id"] for b in batches])]
    return _LedgerView(
        pipeline,
        tuple(spec.topics),
        tx.cursors(pipeline),
        planned[0] if planned else None,
        batches,
        attempts,
        tx.batch_history(pipeline, since, history.MAX_BATCHES),
    )


@dataclass(frozen=True)
class _KafkaAnswer:
    offsets: dict[TopicPartition, PartitionOffsets]
    error: str | None = None
    unavailable: bool = False  # Kafka itself did not answer (not just one pipeline's topic)


def _kafka_offsets(kafka: KafkaPositions, topics: tuple[str, ...]) -> _KafkaAnswer:
    try:
        return _KafkaAnswer(kafka.offsets(list(topics)))
    except KafkaUnavailableError as exc:
        return _KafkaAnswer({}, str(exc), unavailable=True)
    except KafkaOffsetsError as exc:  # e.g. a topic gone: the page still shows the ledger's side
        return _KafkaAnswer({}, str(exc))


def _partitions(view: _LedgerView, offsets: dict[TopicPartition, PartitionOffsets]) -> list[TopicPartition]:
    return shown_partitions(view.topics, view.cursors, offsets)


def _state(
    view: _LedgerView, offsets: dict[TopicPartition, PartitionOffsets], lag: int | None, now: datetime
) -> PipelineState:
    in_flight = view.in_flight["batch_id"] if view.in_flight else None
    ages = history.lag_age(view.history, now)
    return history.state(
        lost_partitions=sum(tp in offsets and at < offsets[tp].earliest for tp, at in view.cursors.items()),
        failing_attempts=sum(a["batch_id"] == in_flight and a["state"] in ("failed", "dead") for a in view.attempts),
        lag_records=lag,
        age_bound_s=ages[-1].value if ages else None,
        lagging_after_s=LAGGING_AFTER_S,
    )


def _summary(
    view: _LedgerView, offsets: dict[TopicPartition, PartitionOffsets], kafka_error: str | None, now: datetime
) -> PipelineSummary:
    lag = None
    if kafka_error is None:
        lag = total_lag(view.cursors, offsets)
    trend = [p for p in history.lag_records(view.history, now, lag) if (now - p.at).total_seconds() <= TREND_S]
    return PipelineSummary(
        name=view.name,
        topics=view.topics,
        partitions=len(_partitions(view, offsets)),
        lag_records=lag,
        kafka_error=kafka_error,
        in_flight=view.in_flight,
        last_batch=next((b for b in view.batches if b["state"] == "committed"), None),
        dead_attempts=sum(a["state"] == "dead" for a in view.attempts),
        state=_state(view, offsets, lag, now),
        lag_trend=tuple(trend),
        now=now,
    )


def overview(ledger: Ledger, kafka: KafkaPositions, page: int = 1) -> Overview:
    """One page of pipelines (by name) with their total lag, batch in flight and last batch."""
    now = datetime.now(UTC)
    with ledger.transaction(read_only=True) as tx:
        if not _ledger_exists(tx):
            return Overview((), 1, 1, 0)
        names, total = tx.pipeline_names(PIPELINES_PER_PAGE, (page - 1) * PIPELINES_PER_PAGE)
        views = [_read(tx, name, now - timedelta(seconds=TREND_S)) for name in names]
    summaries = []
    down: _KafkaAnswer | None = None  # once Kafka does not answer, the other pipelines do not wait for it again
    for view in views:
        answer = down or _kafka_offsets(kafka, view.topics)
        down = answer if answer.unavailable else None
        summaries.append(_summary(view, answer.offsets, answer.error, now))
    return Overview(tuple(summaries), page, _pages(total, PIPELINES_PER_PAGE), total)


def pipeline_detail(
    ledger: Ledger, kafka: KafkaPositions, pipeline: str, page: int = 1, range_name: str | None = None
) -> PipelineDetail:
    """One pipeline: a page of its partitions, its recent batches with their ranges, their attempts,
    and its charts over ``range_name`` (hour, day or week; default a day)."""
    shown_range, seconds = history.range_seconds(range_name)
    now = datetime.now(UTC)
    start = now - timedelta(seconds=max(seconds, TREND_S))
    with ledger.transaction(read_only=True) as tx:
        if not _ledger_exists(tx):
            raise PipelineNotFoundError(
                f"pipeline {pipeline!r} is not in the ledger (schema {ledger.schema!r} is empty)"
            )
        view = _read(tx, pipeline, start)
        ranges = tx.batch_ranges(pipeline, [b["batch_id"] for b in view.batches], RANGES_SHOWN)
    answer = _kafka_offsets(kafka, view.topics)
    offsets, error = answer.offsets, answer.error
    every = _partitions(view, offsets)
    shown = every[(page - 1) * PARTITIONS_PER_PAGE : page * PARTITIONS_PER_PAGE]
    oldest_unread = _timestamps(kafka, lagging_cursors(shown, view.cursors, offsets))
    summary = _summary(view, offsets, error, now)
    return PipelineDetail(
        summary=summary,
        partitions=partition_statuses(shown, view.cursors, offsets, oldest_unread, now, _retention(kafka, view.topics)),
        page=page,
        pages=_pages(len(every), PARTITIONS_PER_PAGE),
        batches=tuple(BatchLine(b, ranges[b["batch_id"]].ranges, ranges[b["batch_id"]].total) for b in view.batches),
        attempts=tuple(view.attempts),
        history=_history(view.history, summary.lag_records, shown_range, now - timedelta(seconds=seconds), now),
    )


def _history(points: list[BatchPoint], lag: int | None, range_name: str, start: datetime, now: datetime) -> History:
    shown = [p for p in points if p.planned_at >= start]
    batches = history.per_batch(shown)
    return History(
        range=range_name,
        start=start,
        now=now,
        lag_records=tuple(history.lag_records(shown, now, lag)),
        lag_age=tuple(history.lag_age(shown, now)),
        records=tuple(batches["records"]),
        bytes=tuple(batches["bytes"]),
        seconds=tuple(batches["seconds"]),
    )


def _retention(kafka: KafkaPositions, topics: tuple[str, ...]) -> dict[str, TopicRetention] | None:
    try:
        return kafka.retention(topics)
    except KafkaOffsetsError:  # the time left before retention stays unknown; the rest is shown anyway
        return None


def _timestamps(kafka: KafkaPositions, positions: dict[TopicPartition, int]) -> dict[TopicPartition, Any]:
    try:
        return kafka.timestamps_at(positions)
    except KafkaOffsetsError:  # lag in time stays unknown; lag in records is shown anyway
        return {}
