"""The example ingest DAG under the real deployment's scheduler and LocalExecutor, and manual
operations triggered through the REST API.

Records arrive in waves while the scheduler runs ``kafka_ingest_example`` every few seconds (its
variables point it at this test's topic); the read task of a batch is killed mid-Spark and
Airflow's own retry finishes the batch. Every id must land exactly once and each batch must hold
exactly the waves that arrived before its plan. Then a reset is triggered through
``POST .../dagRuns`` with a conf, as a script or another system would, and checked against the
ledger.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psutil
import psycopg2
import pytest

from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.ledger import Ledger

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce
from .test_assets_lineage import DAG_ID, airflow_variables, api, request_parse, runs_of
from .test_manual_ops_ui import DAG_ID as MANUAL_OPS_DAG_ID
from .test_manual_ops_ui import result_of, run_ids, wait_for_new_run, wait_until

INTERVAL_S = 10  # the example DAG's schedule while this module runs (kafka_offsets_demo_interval_seconds)
DEFAULT_INTERVAL_S = 300
PARTITIONS = 2


def reparse(airflow: dict, interval_s: int, timeout: float = 120) -> None:
    """Ask the dag-processor to parse the example DAG now; wait until its schedule is ``interval_s``."""
    request_parse(airflow, DAG_ID)
    summary = str(timedelta(seconds=interval_s))
    wait_until(
        lambda: api(airflow, f"dags/{DAG_ID}/details")["timetable_summary"] == summary,
        f"{DAG_ID} to be scheduled every {summary}",
        timeout,
    )


def stop_scheduling(airflow: dict) -> None:
    """Pause the DAG and fail its unfinished runs (a paused DAG's running run would never end)."""
    api(airflow, f"dags/{DAG_ID}", "PATCH", {"is_paused": True})

    def active() -> list[str]:
        return [k for k, r in runs_of(airflow, DAG_ID).items() if r["state"] in ("queued", "running")]

    for run_id in active():
        api(airflow, f"dags/{DAG_ID}/dagRuns/{run_id}", "PATCH", {"state": "failed"})
    wait_until(lambda: not active(), f"the runs of {DAG_ID} to end", 60)


@pytest.fixture()
def scheduled_example(airflow_ui, stack, make_topic, tmp_path) -> Iterator[dict[str, Any]]:
    """The example DAG pointed at a fresh topic and pipeline, every INTERVAL_S seconds, paused.

    Afterwards: paused, no run of it left going, its variables gone, its schedule back to the default.
    """
    topic = make_topic(partitions=PARTITIONS)
    pipeline = f"sched_{uuid.uuid4().hex[:10]}"
    variables = {
        "kafka_offsets_demo_topic": topic,
        "kafka_offsets_demo_pipeline": pipeline,
        "kafka_offsets_demo_output": str(tmp_path / "out"),
        "kafka_offsets_demo_interval_seconds": str(INTERVAL_S),
    }
    stop_scheduling(airflow_ui)
    try:
        with airflow_variables(airflow_ui, variables):
            try:
                reparse(airflow_ui, INTERVAL_S)
                ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=airflow_ui["ledger_schema"])
                ledger.migrate()
                yield {"topic": topic, "pipeline": pipeline, "ledger": ledger}
            finally:
                stop_scheduling(airflow_ui)  # a run still going would read the defaults once the variables are gone
    finally:
        reparse(airflow_ui, DEFAULT_INTERVAL_S)


# (batch, state, kind, run that planned it, run that committed it) of every batch
BATCHES = (
    "SELECT batch_id, state, kind, planned_by->>'run_id', committed_by->>'run_id'"
    " FROM {s}.batches WHERE pipeline = %s ORDER BY batch_id"
)
# (batch, state, Airflow run, try) of every Spark attempt, oldest first
ATTEMPTS = (
    "SELECT batch_id, state, actor->>'run_id', (actor->>'try_number')::int"
    " FROM {s}.attempts WHERE pipeline = %s ORDER BY started_at"
)
AUDIT = "SELECT event, batch_id FROM {s}.audit WHERE pipeline = %s ORDER BY id"


def rows(ledger: Ledger, query: str, pipeline: str) -> list[tuple]:
    with ledger.transaction() as tx:
        return tx.fetchall(query, (pipeline,))


def wait_for_batch(ledger: Ledger, pipeline: str, batch_id: int, timeout: float = 240) -> str:
    """The run that planned ``batch_id`` (the scheduler's), once it has."""
    return wait_until(
        lambda: next((b[3] for b in rows(ledger, BATCHES, pipeline) if b[0] == batch_id), None),
        f"a scheduled run to plan batch {batch_id}",
        timeout,
    )


def read_task(airflow: dict, run_id: str) -> dict:
    return api(airflow, f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/ingest.read")


def spark_running_under(pid: int) -> bool:
    """Whether the task process has spark-submit's JVM running the batch app below it."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    return any(runs_the_batch_app(child) for child in children)


def runs_the_batch_app(process: psutil.Process) -> bool:
    """A JVM with the app on its command line. A process that exits while it is looked at (spark-submit's
    launcher JVM, a zombie until its parent reaps it) is not the driver."""
    try:
        return "java" in process.name() and "kafka_range_batch" in " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return False


def kill_read_mid_spark(airflow: dict, ledger: Ledger, pipeline: str, run_id: str) -> None:
    """SIGKILL the first try of the run's read task and the Spark driver it started (its process group)."""
    ti = wait_until(
        lambda: (ti := read_task(airflow, run_id))["state"] == "running" and ti["pid"] and ti,
        "the read task to run",
        120,
    )
    assert ti["try_number"] == 1
    pid = ti["pid"]
    wait_until(lambda: spark_running_under(pid), f"Spark under the read task (pid {pid})", 120)
    assert [a[:2] for a in rows(ledger, ATTEMPTS, pipeline) if a[2] == run_id] == [(2, "running")]
    # The task runner leads its own process group (Airflow's supervisor puts it there): the group is
    # the task and its Spark driver, never the supervisor or the executor.
    assert os.getpgid(pid) == pid
    os.killpg(pid, signal.SIGKILL)


def ranges_of(batch_waves: list[list[list[dict]]]) -> list[tuple]:
    """The ledger's batch_ranges rows expected when batch k holds exactly the waves ``batch_waves[k-1]``,
    one Kafka transaction each: a wave's range on a partition ends one past its commit marker."""
    rows, start = [], dict.fromkeys(range(PARTITIONS), 0)
    for batch_id, waves in enumerate(batch_waves, 1):
        for p in range(PARTITIONS):
            end, records = start[p], 0
            for wave in waves:
                offsets = sorted(r["offset"] for r in wave if r["partition"] == p)
                assert offsets == list(range(end, end + len(offsets)))
                end, records = end + len(offsets) + 1, records + len(offsets)
            rows.append((batch_id, "committed", p, start[p], start[p], end, records))
            start[p] = end
    return rows


def test_scheduler_ingests_waves_exactly_once_retries_a_read_killed_mid_spark_and_takes_a_rest_reset(
    airflow_ui, stack, scheduled_example
):
    topic, pipeline, ledger = scheduled_example["topic"], scheduled_example["pipeline"], scheduled_example["ledger"]

    def wave(count: int) -> list[dict]:
        return produce(stack.bootstrap_servers, topic, count, PARTITIONS, tag=f"w{count}-", transactional=True)

    # Wave 1, then waves 2 and 3 while the scheduler's first run has batch 1 planned and reads it:
    # batch 1 is wave 1, batch 2 (planned by the next run) waves 2 and 3.
    first = wave(8)
    api(airflow_ui, f"dags/{DAG_ID}", "PATCH", {"is_paused": False})
    runs = [wait_for_batch(ledger, pipeline, 1)]
    second = wave(12)
    wait_until(lambda: read_task(airflow_ui, runs[0])["state"] == "running", "the read of batch 1", 120)
    third = wave(16)
    batch_waves = [[first], [second, third]]
    runs.append(wait_for_batch(ledger, pipeline, 2))
    kill_read_mid_spark(airflow_ui, ledger, pipeline, runs[1])
    ends = {TP(topic, r[2]): r[5] for r in ranges_of(batch_waves)[-PARTITIONS:]}
    wait_until(lambda: ledger.cursors(pipeline) == ends, "batch 2 to commit", 300)
    wait_until(lambda: all(runs_of(airflow_ui, DAG_ID)[r]["state"] == "success" for r in runs), "the runs to end", 60)
    stop_scheduling(airflow_ui)  # before the reset below: nothing may plan meanwhile

    # the scheduler made the runs, one per batch, each planned and committed its own batch
    assert runs[0] != runs[1]
    assert {runs_of(airflow_ui, DAG_ID)[r]["run_type"] for r in runs} == {"scheduled"}
    assert rows(ledger, BATCHES, pipeline) == [(k, "committed", "ingest", r, r) for k, r in enumerate(runs, 1)]
    assert [(r[0], r[1], r[3], r[4], r[5], r[6], r[7]) for r in ledger_ranges(ledger, pipeline)] == ranges_of(
        batch_waves
    )
    assert {r[2] for r in ledger_ranges(ledger, pipeline)} == {topic}
    assert_exactly_once(committed_rows(ledger, pipeline), first + second + third)

    # the killed read: Airflow retried it (try 2) and batch 2 committed once, from the retry's attempt
    assert [(read_task(airflow_ui, r)["try_number"], read_task(airflow_ui, r)["state"]) for r in runs] == [
        (1, "success"),
        (2, "success"),
    ]
    assert rows(ledger, ATTEMPTS, pipeline) == [
        (1, "succeeded", runs[0], 1),
        (2, "dead", runs[1], 1),
        (2, "succeeded", runs[1], 2),
    ]
    assert rows(ledger, AUDIT, pipeline) == [(e, k) for k in (1, 2) for e in ("planned", "committed")]

    # a manual operation through the REST API: rewind partition 0 by 3 records
    before = run_ids(airflow_ui)
    conf = {
        "operation": "reset",
        "pipeline": pipeline,
        "reset_mode": "shift-by",
        "reset_value": "-3",
        "reset_partitions": "0",
        "dry_run": False,
    }
    api(airflow_ui, f"dags/{MANUAL_OPS_DAG_ID}/dagRuns", "POST", {"logical_date": None, "conf": conf})
    run_id = wait_for_new_run(airflow_ui, before)
    result = result_of(airflow_ui, run_id)
    end0, end1 = ends[TP(topic, 0)], ends[TP(topic, 1)]
    assert (result["applied"], result["dry_run"], result["batch_id"]) == (True, False, 3)
    assert [(c["topic"], c["partition"], c["before"], c["after"]) for c in result["changes"]] == [
        (topic, 0, end0, end0 - 3)
    ]
    assert ledger.cursors(pipeline) == {TP(topic, 0): end0 - 3, TP(topic, 1): end1}
    assert rows(ledger, BATCHES, pipeline)[2][:3] == (3, "committed", "reset")
    assert rows(ledger, AUDIT, pipeline)[-1] == ("reset", 3)
