"""The ledger on a real PostgreSQL: migrations, write-ahead plans, compare-and-set commits,
and the constraints PostgreSQL enforces itself."""

from __future__ import annotations

import psycopg2
import pytest

from airflow_kafka_offsets.core.model import BatchState, PartitionOffsets, PartitionRange
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BatchStateError, CursorMovedError, LedgerSchemaTooNewError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.ledger.schema import SCHEMA_VERSION
from airflow_kafka_offsets.service.batches import commit_batch, plan_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink

ACTOR = {"test": True}


def fixed_offsets(**parts):
    table = {TP("t", int(k[1:])): PartitionOffsets(*v) for k, v in parts.items()}
    return lambda topics: table


def test_migrate_is_idempotent_and_versioned(ledger: Ledger):
    assert ledger.schema_version() == SCHEMA_VERSION
    assert ledger.migrate() == SCHEMA_VERSION
    assert ledger.schema_version() == SCHEMA_VERSION


def test_newer_schema_is_refused(ledger: Ledger):
    with ledger.transaction() as tx:
        tx.execute("UPDATE {s}.schema_version SET version = version + 1")
    with pytest.raises(LedgerSchemaTooNewError, match="upgrade the package"):
        ledger.check_version()
    with pytest.raises(LedgerSchemaTooNewError):
        ledger.migrate()


def test_empty_batches_commit_without_spark_and_plans_are_replayed(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path), starting_offsets="latest")
    sink = LocalDirectorySink(str(tmp_path))
    first = plan_batch(ledger, spec, fixed_offsets(p0=(0, 40), p1=(5, 5)), sink, ACTOR)
    assert first.plan.batch_id == 1 and not first.replayed
    assert first.plan.ranges == (PartitionRange("t", 0, 40, 40, 40), PartitionRange("t", 1, 5, 5, 5))
    # a second planner sees the planned batch and replays it, whatever Kafka says now (I2)
    again = plan_batch(ledger, spec, fixed_offsets(p0=(0, 90), p1=(5, 9)), sink, ACTOR)
    assert again.replayed and again.plan == first.plan
    outcome = commit_batch(ledger, sink, "p", 1, ACTOR)
    assert outcome.committed_now and outcome.records == 0
    assert ledger.cursors("p") == {TP("t", 0): 40, TP("t", 1): 5}
    # a second commit of the same batch changes nothing
    assert not commit_batch(ledger, sink, "p", 1, ACTOR).committed_now
    nothing = plan_batch(ledger, spec, fixed_offsets(p0=(0, 40), p1=(5, 5)), sink, ACTOR)
    assert nothing.plan is None


def test_batch_with_records_needs_a_successful_attempt(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 10)), sink, ACTOR)
    with pytest.raises(BatchStateError, match="no successful Spark attempt"):
        commit_batch(ledger, sink, "p", 1, ACTOR)
    assert ledger.batch("p", 1).state is BatchState.PLANNED
    assert ledger.cursors("p") == {TP("t", 0): 0}


def test_cursor_compare_and_set_fences_a_stale_commit(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path), starting_offsets="latest")
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 7)), sink, ACTOR)
    with ledger.transaction() as tx:  # someone moved the cursor behind the ledger's back
        tx.execute("UPDATE {s}.cursors SET next_offset = 3 WHERE pipeline = 'p'")
    with pytest.raises(CursorMovedError, match="t-0 expected 7 found 3"):
        commit_batch(ledger, sink, "p", 1, ACTOR)
    assert ledger.batch("p", 1).state is BatchState.PLANNED
    assert ledger.cursors("p") == {TP("t", 0): 3}


def test_postgres_refuses_overlapping_ranges_and_two_planned_batches(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 10)), sink, ACTOR)
    insert_batch = (
        "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned,"
        " committed_at) VALUES ('p', 2, 0, %s, 'x', 5, %s)"
    )
    insert_range = (
        "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition,"
        " cursor_offset, start_offset, end_offset) VALUES ('p', 2, %s, 't', 0, %s, %s, %s)"
    )
    with pytest.raises(psycopg2.errors.UniqueViolation, match="batches_one_planned"):
        with ledger.transaction() as tx:
            tx.execute(insert_batch, ("planned", None))
    with pytest.raises(psycopg2.errors.ExclusionViolation):
        with ledger.transaction() as tx:
            tx.execute(insert_batch, ("committed", "2026-01-01"))
            tx.execute(insert_range, (0, 9, 9, 12))  # overlaps [0, 10) of batch 1
    with ledger.transaction() as tx:  # a later epoch (after a rewind) may cover the same offsets again
        tx.execute(insert_batch, ("committed", "2026-01-01"))
        tx.execute(insert_range, (1, 0, 0, 10))
    assert ledger.batch("p", 1).state is BatchState.PLANNED


def test_audit_trail_records_who_did_what(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path), starting_offsets="latest")
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 1)), sink, {"run_id": "r1"})
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 1)), sink, {"run_id": "r2"})
    commit_batch(ledger, sink, "p", 1, {"run_id": "r2"})
    with ledger.transaction() as tx:
        events = tx.fetchall("SELECT event, batch_id, actor->>'run_id' FROM {s}.audit ORDER BY id")
    assert events == [("planned", 1, "r1"), ("replayed", 1, "r2"), ("committed", 1, "r2")]
