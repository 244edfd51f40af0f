"""DAG runs as Airflow runs them: each task a worker process, tried up to ``retries + 1`` times, the
run failed when a task has no tries left; the next scheduled run starts again from the first task.

The three-task form runs plan >> read >> commit (``kafka_ingest_task_group``), the one-task form one
``batch`` task (``KafkaBatchOperator``), whose every try must replay the batch planned when it started.
"""

from __future__ import annotations

import time
from typing import Any

from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.service.faults import CRASH_ENV
from faults_harness.context import MISSED, TrialError
from faults_harness.fault import Fault
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker
from faults_harness.results import RunOutcome

RETRIES = 2  # as the example DAGs' default_args
RETRY_DELAY_S = 1.0
MAX_RUNS = 4  # runs (each with its task retries) before a trial counts as stuck


def run_dag(pipe: Pipeline, run_id: str, retries: int = RETRIES, faults: list[Fault] | None = None) -> RunOutcome:
    """One DAG run: its tasks in order, each tried up to ``retries + 1`` times."""
    outcome = RunOutcome(run_id, ok=False)
    batch_id = None
    for step in pipe.ctx.steps:
        worker = run_task(pipe, step, run_id, retries, batch_id, faults or [])
        if not worker.ok:
            outcome.failed_step = step
            return outcome
        answer = worker.answer()
        if step in ("plan", "batch"):
            batch_id = answer["batch_id"]
            outcome.planned_batch = batch_id
            if batch_id is None:  # read and commit find nothing to do
                outcome.ok = True
                return outcome
        if step in ("commit", "batch"):
            outcome.committed_now = answer["committed_now"]
    outcome.ok = True
    outcome.batch_id = batch_id
    return outcome


def run_task(pipe: Pipeline, step: str, run_id: str, retries: int, batch_id: int | None, faults: list[Fault]) -> Worker:
    """One task's tries until one succeeds or none is left; returns the last try's worker.

    Each fault hits the first try of its step not hit yet (a chain of faults on one step
    hits successive tries).
    """
    for try_number in range(1, retries + 2):
        inject = next((f for f in faults if f.step == step and not f.fired), None)
        worker = pipe.worker(step, run_id, try_number, batch_id, inject.env if inject else None)
        planned_before = worker.batch_id if step == "batch" else None
        if inject is not None:
            inject.fired = True
            inject.outcome = inject.monitor(pipe, worker) if inject.monitor else "crash point reached"
        pipe.finish(worker, run_id, try_number)
        if inject is not None:
            if inject.env.get(CRASH_ENV) and worker.returncode != -9:
                inject.outcome = f"{MISSED}crash point {inject.env[CRASH_ENV]} not reached"
            if inject.after:
                inject.after()
        if worker.ok:
            if planned_before is not None:
                check_replayed(pipe, planned_before, worker.answer())
            return worker
        if try_number <= retries:
            time.sleep(RETRY_DELAY_S)
    return worker


def check_replayed(pipe: Pipeline, planned: int, answer: dict[str, Any]) -> None:
    """A one-task try that started with batch ``planned`` in the ledger ran that batch as a replay, unless
    another worker committed it meanwhile (a successor, a concurrent run): then it may plan the next."""
    if answer["batch_id"] == planned and answer["replayed"]:
        return
    with pipe.ctx.ledger().transaction() as tx:
        committed = tx.batch(pipe.name, planned).state is BatchState.COMMITTED
    if not committed or (answer["batch_id"] is not None and answer["batch_id"] <= planned):
        raise TrialError(f"a batch task started with batch {planned} planned but did not replay it: {answer}")


def run_until_success(
    pipe: Pipeline, run_prefix: str, first_run: int = 1, faults: list[Fault] | None = None
) -> RunOutcome:
    """Scheduled runs until one succeeds (each with task retries); stuck after MAX_RUNS.

    Faults of a chain not injected yet hit the next runs.
    """
    for n in range(first_run, MAX_RUNS + 1):
        outcome = run_dag(pipe, f"{run_prefix}-run{n}", faults=faults)
        if outcome.ok:
            return outcome
    raise TrialError(f"no run of {pipe.name} succeeded in {MAX_RUNS} runs; last failures:\n" + pipe.failure_tails())
