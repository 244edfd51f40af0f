"""Concurrent and stale runs of one pipeline, each step in its own OS process (as Airflow tasks).

Runs "started together" are made to really collide: the test holds the ledger row the steps
lock (the pipeline row for plan, the batch row for commit) until every worker is blocked on
it, then lets them all go at once.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psycopg2
import pytest

from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BatchStateError, PipelineBusyError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import load_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink
from faults_harness.context import Context
from faults_harness.monitors import wait_paused
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker
from faults_harness.worker import PAUSE_ENV

from .helpers import assert_exactly_once, committed_rows, local_path
from .pipeline import ACTOR, operation_context, plan, read

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def pipe(stack, ledger, schema, tmp_path) -> Pipeline:
    """A fresh topic (3 partitions) and pipeline whose steps run as worker processes."""
    ctx = Context(stack, schema=schema, workdir=tmp_path)
    return Pipeline(ctx, "conc", 0, random.Random(0))


def spec_of(pipe: Pipeline):
    return build_spec(pipe.name, [pipe.topic], pipe.output_root)


def app_names(workers: list[Worker]) -> list[str]:
    return [w.env["PGAPPNAME"] for w in workers]


def wait_blocked_on_lock(stack, workers: list[Worker], timeout: float = 120.0) -> None:
    """Until every worker's ledger session waits for a lock (or fail with their logs)."""
    names = app_names(workers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s) AND wait_event_type = 'Lock'",
                (names,),
            )
            blocked = cur.fetchone()[0]
        conn.close()
        if blocked == len(workers):
            return
        dead = [w for w in workers if not w.alive()]
        assert not dead, "a worker ended before blocking:\n" + "\n".join(w.tail() for w in dead)
        time.sleep(0.1)
    raise AssertionError("workers did not all block on the ledger lock:\n" + "\n".join(w.tail() for w in workers))


@contextmanager
def holding(ledger, lock):
    """Run ``lock(tx)`` in a transaction kept open for the body of the with block."""
    with ledger.transaction() as tx:
        lock(tx)
        yield


def finish(pipe: Pipeline, workers: list[Worker]) -> None:
    for i, w in enumerate(workers):
        pipe.finish(w, "race", i + 1)


def audit_counts(ledger, pipeline: str) -> dict[tuple[int, str], int]:
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT batch_id, event, count(*) FROM {s}.audit WHERE pipeline = %s"
            " AND batch_id IS NOT NULL GROUP BY batch_id, event",
            (pipeline,),
        )
    return {(int(b), e): int(n) for b, e, n in rows}


def test_two_plans_started_together_plan_one_batch(stack, ledger, pipe):
    pipe.produce(90, "a-")
    spec = spec_of(pipe)
    with holding(ledger, lambda tx: tx.lock_pipeline(spec)):  # creates and locks the pipeline row
        workers = [pipe.worker("plan", f"run{i}", 1) for i in (1, 2)]
        wait_blocked_on_lock(stack, workers)
    finish(pipe, workers)
    assert all(w.ok for w in workers), [w.tail() for w in workers]
    results = [w.result for w in workers]
    assert {r["batch_id"] for r in results} == {1}
    assert sorted(r["replayed"] for r in results) == [False, True]
    assert {r["records_planned"] for r in results} == {90}
    counts = audit_counts(ledger, pipe.name)
    assert counts[(1, "planned")] == 1 and counts[(1, "replayed")] == 1
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT batch_id, state FROM {s}.batches WHERE pipeline = %s", (pipe.name,)) == [
            (1, "planned")
        ]


def published_attempt(uri: str) -> str:
    return json.loads((local_path(uri) / "_kafka_batch_report.json").read_text())["attempt_id"]


@pytest.mark.long  # the model wakes stale workers after a successor took over on every history
def test_stale_workers_are_fenced(stack, ledger, schema, pipe):
    """Workers presumed dead wake up after a successor took over: none of them commits again."""
    produced = pipe.produce(150, "a-")
    spec = spec_of(pipe)
    batch = plan(ledger, spec, stack).plan

    # A: a reader that stops (presumed dead) right after its Spark attempt succeeded
    reader_a = pipe.worker("read", "run-a", 1, batch.batch_id, {PAUSE_ENV: "after_spark"})
    assert wait_paused(reader_a), reader_a.tail()
    # its successor replays the same plan; its read finds A's succeeded attempt and uses it
    replay = plan(ledger, spec, stack)
    assert replay.replayed and replay.plan == batch
    read(ledger, spec, stack, replay)

    # C: a committer that stops inside the commit transaction, after publishing, holding the
    # batch row; its session is ended (idle-in-transaction timeout, or killed as a zombie's)
    committer_c = pipe.worker("commit", "run-c", 1, batch.batch_id, {PAUSE_ENV: "after_publish"})
    assert wait_paused(committer_c), committer_c.tail()
    # while C holds the batch row, another committer waits, then stops with a clear message
    impatient = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema, lock_timeout_s=2)
    with pytest.raises(PipelineBusyError, match="waiting for a ledger lock held by another run"):
        commit_batch(impatient, LocalDirectorySink(pipe.output_root), pipe.name, batch.batch_id, ACTOR)
    assert ledger.batch(pipe.name, batch.batch_id).state is BatchState.PLANNED
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (committer_c.env["PGAPPNAME"],),
        )
        assert len(cur.fetchall()) == 1
    conn.close()
    # D, the successor, commits
    successor = commit_batch(
        ledger, LocalDirectorySink(pipe.output_root), pipe.name, batch.batch_id, replace(ACTOR, run_id="successor")
    )
    assert successor.committed_now and successor.records == 150
    cursors = ledger.cursors(pipe.name)
    winner = published_attempt(batch.output_uri)

    # the stale committer wakes up: its transaction is gone, it cannot commit
    committer_c.resume()
    pipe.finish(committer_c, "run-c", 1)
    assert not committer_c.ok and committer_c.returncode == 1, committer_c.tail()
    # the stale reader wakes up with its old attempt; its run goes on to commit: already committed
    reader_a.resume()
    pipe.finish(reader_a, "run-a", 1)
    assert reader_a.ok, reader_a.tail()
    commit_a = pipe.worker("commit", "run-a", 1, batch.batch_id)
    pipe.finish(commit_a, "run-a", 1)
    assert commit_a.ok and commit_a.result["committed_now"] is False, commit_a.tail()

    record = ledger.batch(pipe.name, batch.batch_id)
    assert record.state is BatchState.COMMITTED and record.committed_by.run_id == "successor"
    assert audit_counts(ledger, pipe.name)[(batch.batch_id, "committed")] == 1
    assert ledger.cursors(pipe.name) == cursors  # nobody moved the cursor twice
    assert published_attempt(batch.output_uri) == winner  # nobody published again
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)
    assert ledger.contiguity_problems(pipe.name) == []


def test_two_commits_started_together_commit_once_and_a_stale_run_of_an_aborted_batch_cannot(stack, ledger, pipe):
    """A run presumed dead after planning; its batch is aborted and a successor plans the same
    offsets as a new batch and reads them; two committers of that batch start together: one
    commits, the other reports it committed; the stale run then tries to read or commit its
    old batch and is refused."""
    from airflow_kafka_offsets.service.operations.abort import abort_planned_batch

    produced = pipe.produce(120, "a-")
    spec = spec_of(pipe)
    stale = plan(ledger, spec, stack).plan
    abort_planned_batch(operation_context(ledger, stack), pipe.name, "worker presumed dead")
    successor = plan(ledger, spec, stack)
    assert not successor.replayed and successor.plan.batch_id == stale.batch_id + 1
    assert [(r.start, r.end) for r in successor.plan.ranges] == [(r.start, r.end) for r in stale.ranges]
    read(ledger, spec, stack, successor)
    batch_id = successor.plan.batch_id

    with holding(ledger, lambda tx: tx.batch(pipe.name, batch_id, for_update=True)):
        workers = [pipe.worker("commit", f"run{i}", 1, batch_id) for i in (1, 2)]
        wait_blocked_on_lock(stack, workers)
    finish(pipe, workers)
    assert all(w.ok for w in workers), [w.tail() for w in workers]
    results = [w.result for w in workers]
    assert sorted(r["committed_now"] for r in results) == [False, True]
    assert {r["records"] for r in results} == {120}
    assert audit_counts(ledger, pipe.name)[(batch_id, "committed")] == 1
    loser = next(w for w in workers if not w.result["committed_now"])
    assert f"batch {batch_id} was already committed" in loser.output()
    assert sorted(p.name for p in (Path(pipe.output_root) / pipe.name).iterdir()) == [f"batch={batch_id:012d}"]

    cursors = ledger.cursors(pipe.name)
    with pytest.raises(BatchStateError, match="aborted"):
        load_batch(ledger, pipe.name, stale.batch_id)
    stale_commit = pipe.worker("commit", "stale", 1, stale.batch_id)
    pipe.finish(stale_commit, "stale", 1)
    assert not stale_commit.ok and "BatchStateError" in stale_commit.error, stale_commit.tail()
    assert f"batch {stale.batch_id}" in stale_commit.error and "aborted" in stale_commit.error
    assert ledger.cursors(pipe.name) == cursors
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)
    assert ledger.contiguity_problems(pipe.name) == []


def test_two_dag_runs_started_together(stack, airflow_db, ledger, schema, pipe, tmp_path):
    """`airflow dags test` twice at once (a scheduled run and a manual one) on the same pipeline."""
    produced = pipe.produce(150, "a-")
    homes = []
    for name in ("scheduled", "manual"):
        home = tmp_path / f"home-{name}"
        home.mkdir()
        shutil.copy(Path(airflow_db) / "airflow.db", home / "airflow.db")  # each run its own metadata DB
        homes.append(home)
    airflow = str(Path(sys.executable).parent / "airflow")
    procs = []
    for home, logical_date in zip(homes, ("2026-01-01T00:00:00+00:00", "2026-01-01T00:05:00+00:00")):
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC": pipe.topic,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE": pipe.name,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT": pipe.output_root,
            "AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA": schema,
        }
        log = open(home / "dags-test.log", "w")
        procs.append(
            (
                subprocess.Popen(
                    [airflow, "dags", "test", "kafka_ingest_example", logical_date],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=REPO,
                ),
                home,
            )
        )
    for proc, _home in procs:
        proc.wait(timeout=900)
    outputs = [(home / "dags-test.log").read_text(errors="replace") for _, home in procs]
    assert all(p.returncode == 0 for p, _ in procs), "\n\n".join(o[-4000:] for o in outputs)
    batches = ledger.committed_batches(pipe.name)
    assert [b.records_committed for b in batches] == [150]
    counts = audit_counts(ledger, pipe.name)
    assert counts[(1, "planned")] == 1 and counts[(1, "committed")] == 1
    assert_exactly_once(committed_rows(ledger, pipe.name), produced)
    assert ledger.contiguity_problems(pipe.name) == []
    with ledger.transaction() as tx:
        assert tx.planned_batch_id(pipe.name) is None
        # one Spark job for the batch: the other run waited for it, used it, or found the batch committed
        assert tx.fetchall("SELECT state FROM {s}.attempts WHERE pipeline = %s", (pipe.name,)) == [("succeeded",)]
    assert not list((Path(pipe.output_root) / "_staging").rglob("*.parquet"))
