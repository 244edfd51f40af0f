"""Spark attempts on the real stack: leases, runs that wait for a live attempt instead of reading
the same batch again, staging that is never removed under a live attempt, abort after a crash
between publish and commit, and the sweep of what dead attempts and aborted batches left.

Each step runs in its own OS process (as an Airflow task) through the fault harness's worker.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path

import psycopg2
import pytest

from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.service.faults import CRASH_ENV
from faults_harness.context import Context
from faults_harness.monitors import wait_until
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker, group_members

from .helpers import assert_exactly_once, committed_rows, local_path
from .pipeline import ACTOR, operation_context, plan, read, submitter

# Serial: leases run out in seconds, a bound a loaded machine would stretch.
pytestmark = pytest.mark.serial

LEASE_ENV = "AIRFLOW__KAFKA_OFFSETS__ATTEMPT_LEASE_SECONDS"


@pytest.fixture()
def pipe(stack, ledger, schema, tmp_path) -> Pipeline:
    ctx = Context(stack, schema=schema, workdir=tmp_path)
    return Pipeline(ctx, "att", 0, random.Random(0))


def spec_of(pipe: Pipeline):
    return build_spec(pipe.name, [pipe.topic], pipe.output_root)


def attempt_rows(ledger, pipeline: str) -> list[tuple[str, int, str]]:
    with ledger.transaction() as tx:
        return [
            (a, int(b), s)
            for a, b, s in tx.fetchall(
                "SELECT attempt_id, batch_id, state FROM {s}.attempts WHERE pipeline = %s ORDER BY started_at",
                (pipeline,),
            )
        ]


def wait_for_spark_writing(pipe: Pipeline, worker: Worker, timeout: float = 240.0) -> None:
    """Until the worker's Spark attempt writes into its staging directory."""
    assert wait_until(lambda: pipe.spark_phase(worker) != "none", worker, timeout), worker.tail()
    assert worker.alive(), worker.tail()


@contextmanager
def spark_held(worker: Worker) -> Iterator[None]:
    """SIGSTOP the worker's Spark processes (not the worker) for the body of the with block."""
    spark = [pid for pid in group_members(worker.pid) if pid != worker.pid]
    assert spark, worker.tail()
    for pid in spark:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in spark:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def staged_files(pipe: Pipeline) -> list[Path]:
    staging = Path(pipe.output_root) / "_staging"
    return sorted(p for p in staging.rglob("*") if p.is_file()) if staging.exists() else []


def listed_rows(pipe: Pipeline) -> list[dict]:
    """What a reader listing the output root sees: every batch directory under <root>/<pipeline>/."""
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for batch_dir in sorted((Path(pipe.output_root) / pipe.name).glob("batch=*")):
        rows.extend(pq.read_table(batch_dir).to_pylist())
    return rows


@pytest.mark.long  # the model's concurrent runs and replays cover it on every history
def test_a_run_waits_for_the_live_attempt_of_another_run_instead_of_reading_again(stack, ledger, pipe):
    """Issues 9.1 and 16.4: run B's read starts while run A's Spark reads the same planned batch.

    B waits for A's attempt and takes its report; exactly one Spark attempt runs; both runs
    succeed; the run that did not commit names the one that did; nothing stays in _staging.
    """
    produced = pipe.produce(150, "a-")
    batch = plan(ledger, spec_of(pipe), stack).plan
    reader_a = pipe.worker("read", "run-a", 1, batch.batch_id)
    wait_for_spark_writing(pipe, reader_a)
    # A's Spark job is held still (its worker keeps renewing the lease) until B is seen waiting
    with spark_held(reader_a):
        reader_b = pipe.worker("read", "run-b", 1, batch.batch_id)
        assert wait_until(lambda: "is being read by attempt" in reader_b.output(), reader_b, 180), reader_b.tail()
    pipe.finish(reader_b, "run-b", 1)
    commit_b = pipe.worker("commit", "run-b", 1, batch.batch_id)
    pipe.finish(commit_b, "run-b", 1)
    pipe.finish(reader_a, "run-a", 1)
    commit_a = pipe.worker("commit", "run-a", 1, batch.batch_id)
    pipe.finish(commit_a, "run-a", 1)

    workers = [reader_a, reader_b, commit_b, commit_a]
    assert all(w.ok for w in workers), "\n\n".join(w.tail() for w in workers)
    assert [(b, s) for _, b, s in attempt_rows(ledger, pipe.name)] == [(batch.batch_id, "succeeded")]
    assert reader_a.result["records_read"] == reader_b.result["records_read"] == 150
    assert "is being read by attempt" in reader_b.output() and "of run run-a" in reader_b.output()
    assert "using its report, no Spark run" in reader_b.output()
    assert (commit_b.result["committed_now"], commit_a.result["committed_now"]) == (True, False)
    assert f"batch {batch.batch_id} was already committed" in commit_a.output()
    assert "by run run-b" in commit_a.output()
    assert staged_files(pipe) == []
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)
    assert_exactly_once(listed_rows(pipe), produced)


@pytest.mark.long  # the model's concurrent runs and replays cover it on every history
def test_two_replays_of_one_batch_at_once_both_publish_the_same_records(stack, ledger, pipe):
    """Issue 9.1 after replay: one replay's cleanup never removes the other's live staging."""
    from airflow_kafka_offsets.service.operations.replay import replay_batch

    produced = pipe.produce(120, "a-")
    spec = spec_of(pipe)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    from .pipeline import commit

    commit(ledger, spec, outcome.plan.batch_id)
    errors: dict[str, BaseException] = {}
    barrier = threading.Barrier(2)

    def replay(name: str) -> None:
        barrier.wait()
        try:
            ctx = operation_context(ledger, stack, submitter(stack), replace(ACTOR, run_id=name))
            replay_batch(ctx, pipe.name, outcome.plan.batch_id)
        except BaseException as exc:  # reported below
            errors[name] = exc

    threads = [threading.Thread(target=replay, args=(n,)) for n in ("replay-1", "replay-2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == {}
    assert staged_files(pipe) == []
    assert_exactly_once(listed_rows(pipe), produced)
    with ledger.transaction() as tx:
        assert (
            tx.fetchone("SELECT count(*) FROM {s}.audit WHERE pipeline = %s AND event = 'replay'", (pipe.name,))[0] == 2
        )


@pytest.mark.long  # the model's dead workers and expired leases, and the contract's attempts on both ledgers
def test_attempts_of_killed_workers_are_dead_and_swept(stack, ledger, pipe):
    """Issue 9.4: a worker killed during Spark leaves a 'running' attempt; once its lease expires it
    is dead for status, a new read starts its own attempt, and sweep (dry run first) removes its
    staging while a live attempt is never touched."""
    from airflow_kafka_offsets.service.operations.status import pipeline_status, render_status
    from airflow_kafka_offsets.service.operations.sweep import sweep
    from airflow_kafka_offsets.sinks import LocalDirectorySink

    produced = pipe.produce(90, "a-")
    batch = plan(ledger, spec_of(pipe), stack).plan
    short_lease = {LEASE_ENV: "4"}
    victim = pipe.worker("read", "run-killed", 1, batch.batch_id, short_lease)
    wait_for_spark_writing(pipe, victim)
    victim.kill_group()
    ((dead_id, _, state),) = attempt_rows(ledger, pipe.name)
    assert state == "running"  # nobody has looked at it yet
    dead_dir = local_path(LocalDirectorySink(pipe.output_root).staging_uri(pipe.name, batch.batch_id, dead_id))
    assert dead_dir.exists()
    time.sleep(5)  # the lease runs out

    ctx = operation_context(ledger, stack)
    status = pipeline_status(ctx, pipe.name)
    assert status["attempt_counts"] == {"live": 0, "dead": 1, "succeeded": 0, "failed": 0}
    assert [(a["attempt_id"], a["state"]) for a in status["attempts"]] == [(dead_id, "dead")]
    assert f"{dead_id[:12]}" in render_status(status) and "dead" in render_status(status)

    # a live attempt of the next read (its own process, normal lease) while sweep runs
    live = pipe.worker("read", "run-live", 1, batch.batch_id)
    wait_for_spark_writing(pipe, live)
    sink = LocalDirectorySink(pipe.output_root)
    preview = sweep(ledger, sink, pipe.name, dry_run=True)
    assert preview.dry_run and [(i.kind, i.attempt_id) for i in preview.items] == [("dead_attempt", dead_id)]
    assert dead_dir.exists()  # a dry run changes nothing
    done = sweep(ledger, sink, pipe.name, dry_run=False)
    assert [(i.kind, i.attempt_id, i.path) for i in done.items] == [
        (i.kind, i.attempt_id, i.path) for i in preview.items
    ]
    assert not dead_dir.exists()
    assert live.alive() and pipe.spark_phase(live) != "none"  # the live attempt's staging is still there
    pipe.finish(live, "run-live", 1)
    assert live.ok, live.tail()
    commit_w = pipe.worker("commit", "run-live", 1, batch.batch_id)
    pipe.finish(commit_w, "run-live", 1)
    assert commit_w.ok, commit_w.tail()

    assert [s for _, _, s in attempt_rows(ledger, pipe.name)] == ["dead", "succeeded"]
    with ledger.transaction() as tx:
        swept = tx.fetchall(
            "SELECT batch_id, detail->'items'->0->>'attempt_id' FROM {s}.audit WHERE pipeline = %s AND event = 'swept'",
            (pipe.name,),
        )
    assert swept == [(batch.batch_id, dead_id)]
    assert sweep(ledger, sink, pipe.name, dry_run=False).items == ()
    assert staged_files(pipe) == []
    status = pipeline_status(ctx, pipe.name)
    assert status["attempt_counts"] == {"live": 0, "dead": 1, "succeeded": 1, "failed": 0}
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)


@pytest.mark.long  # the model aborts batches crashed after their publication on every history
def test_abort_after_a_crash_between_publish_and_commit_leaves_nothing_visible(stack, ledger, pipe):
    """Issue 9.2: the aborted batch's published directory is withdrawn by the abort; the next batch
    reads the same records and a reader listing the output root sees each of them once."""
    from airflow_kafka_offsets.service.operations.abort import abort_planned_batch

    produced = pipe.produce(90, "a-")
    spec = spec_of(pipe)
    first = plan(ledger, spec, stack)
    read(ledger, spec, stack, first)
    crashed = pipe.worker("commit", "run-crash", 1, first.plan.batch_id, {CRASH_ENV: "after_publish"})
    pipe.finish(crashed, "run-crash", 1)
    assert crashed.returncode == -9, crashed.tail()
    published = local_path(first.plan.output_uri)
    assert published.exists()  # the crash left the published directory of a planned batch

    abort_planned_batch(operation_context(ledger, stack), pipe.name, "operator gave up after the crash")
    assert ledger.batch(pipe.name, first.plan.batch_id).state is BatchState.ABORTED
    assert not published.exists()
    assert staged_files(pipe) == []

    second = plan(ledger, spec, stack)
    assert second.plan.batch_id == first.plan.batch_id + 1
    read(ledger, spec, stack, second)
    from .pipeline import commit

    commit(ledger, spec, second.plan.batch_id)
    assert_exactly_once(listed_rows(pipe), produced)
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)
    assert staged_files(pipe) == []


@pytest.mark.long  # the contract suite refuses a success on a dead attempt on both ledgers
def test_a_read_whose_lease_was_taken_over_is_refused(stack, ledger, schema, pipe):
    """A reader whose attempt was declared dead (by a sweep, after a pause longer than its lease)
    while Spark ran cannot record a success: its output may have been removed under it."""
    pipe.produce(30, "a-")
    batch = plan(ledger, spec_of(pipe), stack).plan
    reader = pipe.worker("read", "run-slow", 1, batch.batch_id, {LEASE_ENV: "3"})
    wait_for_spark_writing(pipe, reader)
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(f'UPDATE "{schema}".attempts SET state = %s WHERE pipeline = %s', ("dead", pipe.name))
    conn.close()
    pipe.finish(reader, "run-slow", 1)
    assert not reader.ok and "lost its lease" in (reader.error or ""), reader.tail()
    assert staged_files(pipe) == []


@pytest.mark.long  # the model's workers killed while Spark runs, then retried, cover it on every history
def test_a_task_retry_does_not_wait_for_the_attempt_of_its_killed_previous_try(stack, ledger, pipe):
    """Airflow starts try 2 only after try 1 ended: try 1's attempt is dead though its lease lasts."""
    produced = pipe.produce(60, "a-")
    batch = plan(ledger, spec_of(pipe), stack).plan
    first = pipe.worker("read", "run-1", 1, batch.batch_id)  # the default lease: 120 s
    wait_for_spark_writing(pipe, first)
    first.kill_group()
    started = time.monotonic()
    retry = pipe.worker("read", "run-1", 2, batch.batch_id)
    pipe.finish(retry, "run-1", 2)
    assert retry.ok, retry.tail()
    assert "is being read by attempt" not in retry.output()
    assert time.monotonic() - started < 110  # it did not wait for the lease to run out
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT state, error, actor->>'try_number' FROM {s}.attempts WHERE pipeline = %s ORDER BY started_at",
            (pipe.name,),
        )
    assert rows == [("dead", "superseded by a later try of its task", "1"), ("succeeded", None, "2")]
    commit_w = pipe.worker("commit", "run-1", 1, batch.batch_id)
    pipe.finish(commit_w, "run-1", 1)
    assert commit_w.ok, commit_w.tail()
    assert staged_files(pipe) == []
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)
