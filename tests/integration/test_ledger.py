"""The ledger on a real PostgreSQL: migrations, write-ahead plans, compare-and-set commits,
and the constraints PostgreSQL enforces itself."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import psycopg2
import pytest

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchState, PartitionOffsets, PartitionRange
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BatchStateError, CursorMovedError, LedgerSchemaTooNewError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.ledger.schema import SCHEMA_VERSION
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink, Publication
from benchmarks.scaling import fake_submit

ACTOR = Actor.from_json({"test": True})


def fixed_offsets(**parts):
    table = {TP("t", int(k[1:])): PartitionOffsets(*v) for k, v in parts.items()}
    return lambda topics: table


def test_migrate_is_idempotent_and_versioned(ledger: Ledger):
    assert ledger.schema_version() == SCHEMA_VERSION
    assert ledger.migrate() == SCHEMA_VERSION
    assert ledger.schema_version() == SCHEMA_VERSION


def test_first_migrations_of_many_schemas_at_once_in_a_new_database_all_succeed(stack):
    """The extension the ledger needs is the database's: eight ledgers of eight schemas migrating at once into
    a database without it create it once (each migration took only its own schema's lock before, and
    "CREATE EXTENSION IF NOT EXISTS" raced: a duplicate key on pg_extension_name_index)."""
    import uuid

    database = f"t_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(stack.pg_dsn())
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{database}"')
    try:
        ledgers = [Ledger(lambda: psycopg2.connect(stack.pg_dsn(database)), schema=f"s{i}") for i in range(8)]
        start = threading.Barrier(len(ledgers))
        errors: list[BaseException] = []

        def migrate(ledger: Ledger) -> None:
            start.wait()
            try:
                ledger.migrate()
            except BaseException as exc:  # the test's verdict, below
                errors.append(exc)
            finally:
                ledger.close()

        threads = [threading.Thread(target=migrate, args=(ledger,)) for ledger in ledgers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert [ledger.schema_version() for ledger in ledgers] == [SCHEMA_VERSION] * len(ledgers)
        for ledger in ledgers:
            ledger.close()
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()


def ledger_at_version(stack, schema: str, monkeypatch, version: int) -> Ledger:
    """A ledger migrated up to ``version`` only; after ``monkeypatch.undo()`` migrate() goes on from there."""
    import airflow_kafka_offsets.ledger.store as store

    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema)
    monkeypatch.setattr(store, "MIGRATIONS", store.MIGRATIONS[:version])
    monkeypatch.setattr(store, "SCHEMA_VERSION", version)
    assert ledger.migrate() == version
    return ledger


def test_migration_4_keeps_a_version_3_ledger_and_its_overlap_check(stack, schema: str, tmp_path, monkeypatch):
    ledger = ledger_at_version(stack, schema, monkeypatch, 3)
    spec = build_spec("p", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 10), p1=(0, 0)), sink, ACTOR)
    monkeypatch.undo()
    assert ledger.migrate() == SCHEMA_VERSION
    with ledger.transaction() as tx:
        assert tx.fetchall(
            "SELECT contype FROM pg_constraint WHERE conrelid = %s::regclass ORDER BY 1", (f"{tx.s}.batch_ranges",)
        ) == [("c",), ("p",)]  # the foreign key to batches is checked per statement since migration 6
        tx.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned, committed_at)"
            " VALUES ('p', 2, 0, 'committed', 'x', 1, now())"
        )
    with pytest.raises(psycopg2.errors.ExclusionViolation, match=r"existing key .*=\(p, 0, t, 0, \[0,10\)\)\."):
        with ledger.transaction() as tx:
            tx.execute(
                "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
                " start_offset, end_offset) VALUES ('p', 2, 0, 't', 0, 9, 9, 10)"
            )
    assert ledger.batch("p", 1).plan.ranges == (PartitionRange("t", 0, 0, 10, 0), PartitionRange("t", 1, 0, 0, 0))
    assert ledger.cursors("p") == {TP("t", 0): 0, TP("t", 1): 0}


def test_migration_6_keeps_a_version_5_ledger_and_checks_ranges_belong_to_a_batch(
    stack, schema: str, tmp_path, monkeypatch
):
    """Migration 6 replaces the per-row foreign key of batch_ranges by a check per statement: a ledger
    with history keeps working, and ranges of a missing batch, or a batch left without its ranges, are
    still refused (SQLSTATE 23503)."""
    ledger = ledger_at_version(stack, schema, monkeypatch, 5)
    spec = build_spec("p", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    first = plan_batch(ledger, spec, fixed_offsets(p0=(0, 0), p1=(0, 0)), sink, ACTOR).plan
    assert commit_batch(ledger, sink, "p", first.batch_id, ACTOR).committed_now
    second = plan_batch(ledger, spec, fixed_offsets(p0=(0, 4), p1=(0, 0)), sink, ACTOR).plan  # planned under 5
    monkeypatch.undo()
    assert ledger.migrate() == SCHEMA_VERSION

    run_batch(ledger, sink, second, fake_submit, {}, ACTOR)  # reads each range whole
    assert commit_batch(ledger, sink, "p", 2, ACTOR).records == 4
    assert ledger.cursors("p") == {TP("t", 0): 4, TP("t", 1): 0}
    assert ledger.contiguity_problems("p") == []
    insert_range = (
        "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
        " start_offset, end_offset) VALUES (%s, %s, 0, 't', 0, 4, 4, 6)"
    )
    for pipeline, batch_id in (("p", 3), ("q", 2)):
        with pytest.raises(
            psycopg2.errors.ForeignKeyViolation,
            match=rf"(?s)_batch_id_fkey.*Key \(pipeline, batch_id\)=\({pipeline}, {batch_id}\) is not present",
        ):
            with ledger.transaction() as tx:
                tx.execute(insert_range, (pipeline, batch_id))
    for change in (
        "DELETE FROM {s}.batches WHERE pipeline = 'p' AND batch_id = 2",
        "UPDATE {s}.batches SET batch_id = 7 WHERE pipeline = 'p' AND batch_id = 2",
        "UPDATE {s}.batch_ranges SET batch_id = 7 WHERE pipeline = 'p' AND batch_id = 1 AND partition = 1",
    ):
        with pytest.raises(psycopg2.errors.ForeignKeyViolation, match=r"\(pipeline, batch_id\)=\(p, [127]\)"):
            with ledger.transaction() as tx:
                tx.execute(change)
    with ledger.transaction() as tx:  # a batch without ranges may still go; ranges of a new batch may come
        tx.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned, committed_at)"
            " VALUES ('p', 3, 0, 'committed', 'x', 2, now()), ('p', 9, 0, 'committed', 'x', 0, now())"
        )
        tx.execute(insert_range, ("p", 3))
        tx.execute("DELETE FROM {s}.batches WHERE pipeline = 'p' AND batch_id = 9")
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT batch_id, count(*) FROM {s}.batch_ranges GROUP BY 1 ORDER BY 1") == [
            (1, 2),
            (2, 2),
            (3, 1),
        ]


def test_migration_7_refuses_truncating_batches_while_ranges_are_left(stack, schema: str, tmp_path, monkeypatch):
    """TRUNCATE fires no row trigger: since migration 6 dropped the foreign key, migration 7 refuses it
    (SQLSTATE 0A000, as the key did) while ranges are left, and the ledger is as it was."""
    ledger = ledger_at_version(stack, schema, monkeypatch, 6)
    spec = build_spec("p", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    first = plan_batch(ledger, spec, fixed_offsets(p0=(0, 3), p1=(0, 0)), sink, ACTOR).plan
    run_batch(ledger, sink, first, fake_submit, {}, ACTOR)
    assert commit_batch(ledger, sink, "p", first.batch_id, ACTOR).records == 3
    monkeypatch.undo()
    assert ledger.migrate() == SCHEMA_VERSION

    # (a plain TRUNCATE of batches is refused by the attempts' foreign key already)
    for statement in ("TRUNCATE {s}.batches CASCADE", "TRUNCATE {s}.batches, {s}.attempts"):
        with pytest.raises(
            psycopg2.errors.FeatureNotSupported,
            match=r'(?s)cannot truncate a table referenced.*Table "batch_ranges" references "batches"',
        ):
            with ledger.transaction() as tx:
                tx.execute(statement)
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT batch_id, state FROM {s}.batches") == [(1, "committed")]
    assert ledger.batch("p", 1).plan.ranges == (PartitionRange("t", 0, 0, 3, 0), PartitionRange("t", 1, 0, 0, 0))
    assert ledger.cursors("p") == {TP("t", 0): 3, TP("t", 1): 0}
    with ledger.transaction() as tx:  # ranges first, then batches: what the foreign key allowed too
        tx.execute("TRUNCATE {s}.batch_ranges")
        tx.execute("TRUNCATE {s}.batches CASCADE")
        assert tx.fetchall("SELECT count(*) FROM {s}.batches") == [(0,)]


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
    with ledger.transaction() as tx:  # succeeded, but without the report the commit copies its counts from
        tx.execute(
            "INSERT INTO {s}.attempts (attempt_id, pipeline, batch_id, state, staging_uri, finished_at)"
            " VALUES ('a1', 'p', 1, 'succeeded', %s, now())",
            (sink.staging_uri("p", 1, "a1"),),
        )
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


def test_postgres_refuses_overlap_from_an_update_or_a_concurrent_writer(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 10)), sink, ACTOR)
    with ledger.transaction() as tx:
        tx.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned, committed_at)"
            " VALUES ('p', 2, 0, 'committed', 'x', 5, now()), ('p', 3, 0, 'committed', 'x', 5, now())"
        )
        tx.execute(
            "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
            " start_offset, end_offset) VALUES ('p', 2, 0, 't', 0, 10, 10, 15)"
        )
    with pytest.raises(psycopg2.errors.ExclusionViolation, match=r"\[0,11\)\) conflicts .*=\(p, 0, t, 0, \[10,15\)\)"):
        with ledger.transaction() as tx:  # widening batch 1 over batch 2
            tx.execute("UPDATE {s}.batch_ranges SET end_offset = 11 WHERE batch_id = 1")
    with ledger.transaction() as tx:  # counts, aborts and empty ranges change nothing that can overlap
        tx.execute("UPDATE {s}.batch_ranges SET records = 4 WHERE batch_id = 2")
        tx.execute("UPDATE {s}.batch_ranges SET live = false WHERE batch_id = 2")
        tx.execute("UPDATE {s}.batch_ranges SET end_offset = 10 WHERE batch_id = 1")
    with ledger.transaction() as tx:
        tx.execute("UPDATE {s}.batch_ranges SET live = true, end_offset = 10 WHERE batch_id = 1")

    insert = (
        "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
        " start_offset, end_offset) VALUES ('p', %s, 0, 't', 0, %s, %s, %s)"
    )
    errors: list[BaseException] = []
    started = threading.Event()

    def second_writer() -> None:
        try:
            with ledger.transaction() as tx:
                started.set()
                tx.execute(insert, (3, 11, 11, 13))  # waits for the first writer's pipeline lock
        except BaseException as exc:  # checked below
            errors.append(exc)

    with ledger.transaction() as tx:  # batch 2 is dead: [10, 12) is free until this commits
        tx.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned, committed_at)"
            " VALUES ('p', 4, 0, 'committed', 'x', 2, now())"
        )
        tx.execute(insert, (4, 10, 10, 12))
        writer = threading.Thread(target=second_writer)
        writer.start()
        started.wait(10)
        writer.join(1)
        assert writer.is_alive()  # blocked behind this transaction
    writer.join(30)
    assert len(errors) == 1 and isinstance(errors[0], psycopg2.errors.ExclusionViolation)
    assert "[11,13)) conflicts with existing key" in str(errors[0]) and "[10,12))" in str(errors[0])


def test_plan_and_commit_of_2000_partitions_write_exact_rows(ledger: Ledger, tmp_path):
    """The set-based statements write, count and compare-and-set every partition exactly."""
    n = 2000
    spec = build_spec("wide", ["t"], str(tmp_path), max_records_per_partition=30)
    publications: list[Publication] = []

    class RecordingSink(LocalDirectorySink):  # what a table sink would write in its commit's properties
        def publish(self, tx, publication: Publication) -> None:
            publications.append(publication)
            super().publish(tx, publication)

    sink = RecordingSink(str(tmp_path))
    latest = {p: (p % 5) * 10 for p in range(n)}  # every fifth partition is empty
    offsets = {TP("t", p): PartitionOffsets(0, latest[p]) for p in range(n)}
    plan = plan_batch(ledger, spec, lambda topics: offsets, sink, ACTOR).plan
    end = {p: min(latest[p], 30) for p in range(n)}
    read = {p: max(end[p] - (p % 7 == 0), 0) for p in range(n)}

    def records(r: dict) -> int:  # some offsets are gaps (transaction markers)
        return r["end"] - r["start"] - (r["partition"] % 7 == 0)

    def submit(job: dict) -> None:
        staging = Path(job["staging_uri"].removeprefix("file://"))
        staging.mkdir(parents=True)
        parts = [
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "records": records(r),
                "distinct_offsets": records(r),
                "min_offset": r["start"],
                "max_offset": r["start"] + records(r) - 1,
                "payload_bytes": 3 * r["partition"],
                "decode_errors": 0,
            }
            for r in job["ranges"]
        ]
        report = {"format": 1, "pipeline": job["pipeline"], "batch_id": job["batch_id"]}
        report.update(attempt_id=job["attempt_id"], output_bytes=7, spark_version="test", partitions=parts)
        (staging / "_kafka_batch_report.json").write_text(json.dumps(report))

    run_batch(ledger, sink, plan, submit, {}, ACTOR)
    assert commit_batch(ledger, sink, "wide", 1, ACTOR).records == sum(read.values())
    assert [p.commit_properties()["kafka-offsets.records"] for p in publications] == [str(sum(read.values()))]
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT pipeline, batch_id, epoch, topic, partition, cursor_offset, start_offset, end_offset, live,"
            " records, min_offset, max_offset, payload_bytes, decode_errors, previous_offset"
            " FROM {s}.batch_ranges ORDER BY partition"
        )
    assert rows == [
        ("wide", 1, 0, "t", p, 0, 0, end[p], True, read[p])
        + ((0, read[p] - 1, 3 * p, 0) if read[p] else (None, None, None, None))
        + (None,)
        for p in range(n)
    ]
    assert ledger.cursors("wide") == {TP("t", p): end[p] for p in range(n)}
    published = json.loads((Path(plan.output_uri.removeprefix("file://")) / "_kafka_batch_report.json").read_text())
    with ledger.transaction() as tx:
        assert tx.fetchrow("SELECT report, records_committed, output_bytes FROM {s}.batches WHERE batch_id = 1") == (
            published,
            sum(read.values()),
            7,
        )

    # the next batch's compare-and-set fails as a whole when one cursor moved underneath
    offsets = {TP("t", p): PartitionOffsets(0, latest[p] + 5) for p in range(n)}
    second = plan_batch(ledger, spec, lambda topics: offsets, sink, ACTOR).plan
    assert [(r.partition, r.cursor, r.start, r.end) for r in second.ranges] == [
        (p, end[p], end[p], min(latest[p] + 5, end[p] + 30)) for p in range(n)
    ]
    with ledger.transaction() as tx:
        tx.execute("UPDATE {s}.cursors SET next_offset = next_offset + 1 WHERE pipeline = 'wide' AND partition = 1234")
    run_batch(ledger, sink, second, submit, {}, ACTOR)
    with pytest.raises(
        CursorMovedError,
        match=rf"^batch 2 of 'wide' cannot commit: cursor moved \(t-1234 expected {end[1234]} found {end[1234] + 1}\)$",
    ):
        commit_batch(ledger, sink, "wide", 2, ACTOR)
    assert ledger.batch("wide", 2).state is BatchState.PLANNED
    assert ledger.cursors("wide") == {TP("t", p): end[p] + (p == 1234) for p in range(n)}
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT count(*), count(records) FROM {s}.batch_ranges WHERE batch_id = 2") == [(n, 0)]


def test_audit_trail_records_who_did_what(ledger: Ledger, tmp_path):
    spec = build_spec("p", ["t"], str(tmp_path), starting_offsets="latest")
    sink = LocalDirectorySink(str(tmp_path))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 1)), sink, Actor(run_id="r1"))
    plan_batch(ledger, spec, fixed_offsets(p0=(0, 1)), sink, Actor(run_id="r2"))
    commit_batch(ledger, sink, "p", 1, Actor(run_id="r2"))
    with ledger.transaction() as tx:
        events = tx.fetchall("SELECT event, batch_id, actor->>'run_id' FROM {s}.audit ORDER BY id")
    assert events == [("planned", 1, "r1"), ("replayed", 1, "r2"), ("committed", 1, "r2")]
