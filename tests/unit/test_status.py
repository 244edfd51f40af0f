"""The one status model behind ``status`` (CLI, operator) and the Kafka pipelines page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import PartitionOffsets
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.retention import TopicRetention
from airflow_kafka_offsets.ledger import Attempt, BatchSummary, LedgerTransaction
from airflow_kafka_offsets.service import status
from airflow_kafka_offsets.service.status import PartitionStatus

NOW = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


def test_every_partition_of_kafka_and_of_the_ledger_is_shown_with_its_cursor_bounds_and_lag():
    cursors = {TP("a", 0): 10, TP("a", 1): 4, TP("a", 2): 7, TP("other", 0): 1}
    offsets = {
        TP("a", 0): PartitionOffsets(2, 10),
        TP("a", 1): PartitionOffsets(0, 9),
        TP("a", 3): PartitionOffsets(5, 8),
    }
    shown = status.shown_partitions(["a"], cursors, offsets)
    assert shown == [TP("a", 0), TP("a", 1), TP("a", 2), TP("a", 3)]  # a-2: Kafka no longer lists it; not "other"
    assert status.lagging_cursors(shown, cursors, offsets) == {TP("a", 1): 4}
    oldest = {TP("a", 1): NOW - timedelta(seconds=61.23456)}
    assert status.partition_statuses(shown, cursors, offsets, oldest, NOW) == (
        PartitionStatus("a", 0, 10, 2, 10, 0, 0.0),  # nothing unread: no age to look up, 0
        PartitionStatus("a", 1, 4, 0, 9, 5, 61.23456),
        PartitionStatus("a", 2, 7, None, None, None, None),
        PartitionStatus("a", 3, None, 5, 8, None, None),  # no cursor yet: lag unknown per partition
    )


def test_status_json_keeps_its_keys_and_rounds_lag_in_time_to_the_millisecond():
    assert PartitionStatus("a", 1, 4, 0, 9, 5, 61.23456, 30.00049).to_json() == {
        "topic": "a",
        "partition": 1,
        "committed_offset": 4,
        "log_start_offset": 0,
        "log_end_offset": 9,
        "lag_records": 5,
        "lag_seconds": 61.235,
        "deletable_in_s": 30.0,
    }
    assert PartitionStatus("a", 3, None, 5, 8, None, None).to_json()["lag_seconds"] is None


def test_a_batch_and_an_attempt_as_status_shows_them():
    batch = BatchSummary(3, "ingest", "committed", 9, 9, 120, NOW - timedelta(minutes=1), NOW)
    assert list(status.batch_status(batch).items()) == [
        ("batch_id", 3),
        ("kind", "ingest"),
        ("state", "committed"),
        ("records_planned", 9),
        ("records_committed", 9),
        ("output_bytes", 120),
        ("planned_at", "2026-11-22T04:59:00+00:00"),
        ("committed_at", "2026-11-22T05:00:00+00:00"),
    ]
    dead = Attempt("a1", "p", 3, "running", "file:///s", None, Actor(run_id="r"), NOW, None, NOW, -1.0, None)
    assert status.attempt_status(dead) == {
        "attempt_id": "a1",
        "batch_id": 3,
        "state": "dead",
        "run_id": "r",
        "started_at": NOW.isoformat(),
        "finished_at": None,
        "lease_expires_at": NOW.isoformat(),
        "error": None,
        "root_cause": None,
    }
    assert status.attempt_counts([dead]) == {"live": 0, "dead": 1, "succeeded": 0, "failed": 0}


def test_the_transaction_keeps_every_statement_callers_use():
    assert {
        "lock_pipeline",
        "replace_spec",
        "lock_existing_pipeline",
        "output_root",
        "cursors",
        "pipeline_names",
        "pipeline_uid",
        "pipeline_spec",
        "planned_batch_id",
        "insert_plan",
        "batch",
        "abort_batch",
        "recent_batches",
        "batch_ranges",
        "advance_cursors",
        "store_counts",
        "record_commit",
        "committed_ingest_batches",
        "batches_overlapping",
        "committed_counts",
        "start_attempt",
        "renew_lease",
        "finish_attempt",
        "mark_dead_attempts",
        "attempts",
        "latest_succeeded_attempt",
        "apply_reset",
        "audit",
        "execute",
        "fetchone",
        "fetchrow",
        "fetchall",
    } <= set(dir(LedgerTransaction))


def test_the_time_left_before_retention_is_computed_per_partition_from_its_topics_settings():
    cursors = {TP("a", 0): 4, TP("a", 1): 9, TP("b", 0): 2}
    offsets = {
        TP("a", 0): PartitionOffsets(0, 9),
        TP("a", 1): PartitionOffsets(0, 9),
        TP("b", 0): PartitionOffsets(0, 5),
    }
    oldest = {TP("a", 0): NOW - timedelta(seconds=50), TP("b", 0): NOW - timedelta(seconds=50)}
    retention = {"a": TopicRetention(retention_ms=80_000, retention_bytes=None), "b": TopicRetention(None, 10**9)}
    shown = status.partition_statuses(sorted(offsets), cursors, offsets, oldest, NOW, retention)
    assert [(p.topic, p.partition, p.deletable_in_s) for p in shown] == [
        ("a", 0, 30.0),  # written 50 s ago, deleted by age at 80 s
        ("a", 1, None),  # nothing unread
        ("b", 0, None),  # a size limit alone: no time bound from one look
    ]
    assert status.partition_statuses(sorted(offsets), cursors, offsets, oldest, NOW)[0].deletable_in_s is None
