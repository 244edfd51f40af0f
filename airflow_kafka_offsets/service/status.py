"""One status model for every view of a pipeline: ``status`` (the CLI's text and ``--json``, the
manual-operations operator's result; service/operations/status.py) and the Kafka pipelines page
(service/overview.py).

Per partition (:class:`PartitionStatus`): ``committed_offset`` is the ledger's cursor (the next
offset to ingest), ``log_start_offset`` and ``log_end_offset`` Kafka's log start offset and last
stable offset, ``lag_records`` the offsets between the cursor and the log end, ``lag_seconds`` the
age of the oldest unread record (0 when nothing is unread, None when unknown), ``deletable_in_s`` the
seconds until the topic's retention may delete that record (core/retention.py; 0: it may now, None:
nothing unread or no time limit). Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.core.planner import partition_lag
from airflow_kafka_offsets.core.retention import TopicRetention, seconds_until_deletable
from airflow_kafka_offsets.core.tables import render_table
from airflow_kafka_offsets.ledger import Attempt, BatchSummary

ATTEMPT_STATES = ("live", "dead", "succeeded", "failed")


@dataclass(frozen=True)
class PartitionStatus:
    """One partition: the ledger's cursor, Kafka's bounds, lag in records and in time."""

    topic: str
    partition: int
    committed_offset: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    lag_records: int | None
    lag_seconds: float | None
    deletable_in_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """As ``status`` gives it (times to the millisecond)."""
        lag_seconds = None if self.lag_seconds is None else round(self.lag_seconds, 3)
        deletable = None if self.deletable_in_s is None else round(self.deletable_in_s, 3)
        return {**asdict(self), "lag_seconds": lag_seconds, "deletable_in_s": deletable}


def shown_partitions(
    topics: Sequence[str], cursors: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, PartitionOffsets]
) -> list[TopicPartition]:
    """The partitions status lists, in order: Kafka's, and those of the topics the ledger has a cursor for."""
    return sorted(set(offsets) | {tp for tp in cursors if tp.topic in topics})


def lagging_cursors(
    partitions: Iterable[TopicPartition],
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
) -> dict[TopicPartition, int]:
    """The cursors of those ``partitions`` with unread records: where lag in time is looked up."""
    return {
        tp: cursors[tp] for tp in partitions if tp in cursors and tp in offsets and cursors[tp] < offsets[tp].latest
    }


def partition_statuses(
    partitions: Iterable[TopicPartition],
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    oldest_unread: Mapping[TopicPartition, datetime | None],
    now: datetime,
    retention: Mapping[str, TopicRetention] | None = None,
) -> tuple[PartitionStatus, ...]:
    """Each partition's status; ``oldest_unread``: the timestamps at :func:`lagging_cursors`;
    ``retention``: each topic's settings (without them, ``deletable_in_s`` stays unknown)."""
    statuses = []
    for tp in partitions:
        cursor, bounds, seen = cursors.get(tp), offsets.get(tp), oldest_unread.get(tp)
        lag = partition_lag(cursor, bounds) if bounds is not None and cursor is not None else None
        age = (now - seen).total_seconds() if seen else (0.0 if lag == 0 else None)
        start, end = (bounds.earliest, bounds.latest) if bounds is not None else (None, None)
        deletable = None
        if bounds is not None and cursor is not None and retention is not None:
            deletable = seconds_until_deletable(cursor, bounds, seen, retention.get(tp.topic), now)
        statuses.append(PartitionStatus(tp.topic, tp.partition, cursor, start, end, lag, age, deletable))
    return tuple(statuses)


def batch_status(batch: BatchSummary) -> dict[str, Any]:
    """A batch as status shows it (``tables`` only for an Iceberg sink or a sink of many tables)."""
    shown = asdict(batch)
    if shown["tables"] is None:
        del shown["tables"]
    return {
        **shown,
        "planned_at": batch.planned_at.isoformat() if batch.planned_at else None,
        "committed_at": batch.committed_at.isoformat() if batch.committed_at else None,
    }


def batch_tables_text(batches: Sequence[Mapping[str, Any]]) -> str:
    """With an Iceberg sink or a sink of many tables, what each shown batch gave each table (empty otherwise)."""
    rows = [
        [b["batch_id"], table, entry.get("snapshot_id", entry.get("version")), entry.get("records")]
        for b in batches
        for table, entry in sorted((b.get("tables") or {}).items())
    ]
    if not rows:
        return ""
    return "\n\n" + render_table(["batch", "table", "snapshot / version", "records"], rows)


def attempt_status(attempt: Attempt) -> dict[str, Any]:
    """An attempt as status shows it: a running attempt whose lease ran out is dead, marked or not."""
    return {
        "attempt_id": attempt.attempt_id,
        "batch_id": attempt.batch_id,
        "state": attempt.shown_state,
        "run_id": attempt.actor.run_id,
        "started_at": attempt.started_at.isoformat() if attempt.started_at else None,
        "finished_at": attempt.finished_at.isoformat() if attempt.finished_at else None,
        "lease_expires_at": attempt.lease_expires_at.isoformat() if attempt.lease_expires_at else None,
        "error": attempt.error,
        "root_cause": attempt.root_cause,
    }


def attempt_counts(attempts: Sequence[Attempt]) -> dict[str, int]:
    """How many attempts are in each shown state (every state, zeros too)."""
    return {state: sum(a.shown_state == state for a in attempts) for state in ATTEMPT_STATES}
