"""The one-task form (KafkaBatchOperator): plan, read and commit in one task, same ledger rows and guarantees.

Real DAG runs of ``kafka_ingest_one_task_example`` (dag.test, and ``airflow dags test`` for a
worker SIGKILLed inside the commit transaction), in both execution modes: the read by spark-submit
(the stack's ``spark_default``) and on the warm Spark Connect server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow import settings

from airflow_kafka_offsets.service.faults import CRASH_ENV

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce, run_dag

pytestmark = pytest.mark.integration

DAG_ID = "kafka_ingest_one_task_example"


@pytest.fixture(params=["spark-submit", "spark-connect"])
def one_task_env(request, monkeypatch, stack, airflow_db, make_topic, tmp_path, schema):
    """The DAG's variables for a fresh topic and pipeline; ``spark_default`` is the stack's spark-submit
    connection, or the warm Spark Connect server's."""
    if request.param == "spark-connect":
        spark_connect = request.getfixturevalue("spark_connect")
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    else:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", stack.airflow_env()["AIRFLOW_CONN_SPARK_DEFAULT"])
    topic = make_topic(partitions=3)
    pipeline = f"one_task_{schema}"
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_ONE_TASK_TOPIC", topic)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_ONE_TASK_PIPELINE", pipeline)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_ONE_TASK_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", schema)
    return topic, pipeline


def test_one_task_per_batch_ingests_waves_exactly_once_with_the_task_groups_ledger_rows(one_task_env, stack, ledger):
    topic, pipeline = one_task_env
    produced = []
    for wave, count in enumerate([900, 600]):
        produced += produce(stack.bootstrap_servers, topic, count, partitions=3, tag=f"w{wave}-")
        run = run_dag(DAG_ID)
        (ti,) = run.get_task_instances()
        assert (ti.task_id, ti.state) == ("batch", "success")
    run_dag(DAG_ID)  # nothing new: no batch, a successful run
    batches = ledger.committed_batches(pipeline)
    assert [b.records_committed for b in batches] == [900, 600]
    assert [[(r.start, r.end) for r in b.plan.ranges] for b in batches] == [[(0, 300)] * 3, [(300, 500)] * 3]
    assert_exactly_once(committed_rows(ledger, pipeline), produced)
    assert ledger.contiguity_problems(pipeline) == []


# the commit is the same worker code in both modes: spark-submit's case runs with the long tests
@pytest.mark.parametrize(
    "one_task_env", [pytest.param("spark-submit", marks=pytest.mark.long), "spark-connect"], indirect=True
)
def test_a_worker_killed_inside_the_commit_transaction_is_retried_into_one_commit(one_task_env, stack, ledger):
    topic, pipeline = one_task_env
    produced = produce(stack.bootstrap_servers, topic, 300, partitions=3)
    airflow = str(Path(sys.executable).parent / "airflow")
    killed = subprocess.run(
        [airflow, "dags", "test", DAG_ID],
        env={**os.environ, CRASH_ENV: "in_commit_transaction"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode != 0, killed.stdout[-2000:]
    (planned,) = [row for row in ledger_ranges(ledger, pipeline) if row[3] == 0]
    assert planned[:2] == (1, "planned")  # the transaction rolled back: planned, not committed
    run_dag(DAG_ID)  # the retry: the same plan, the succeeded read reused, one commit
    (batch,) = ledger.committed_batches(pipeline)
    assert (batch.plan.batch_id, batch.records_committed) == (1, 300)
    with ledger.transaction() as tx:
        attempts = tx.attempts(pipeline, [1])
    assert [a.shown_state for a in attempts] == ["succeeded"]  # the retry read nothing again
    assert_exactly_once(committed_rows(ledger, pipeline), produced)


RENDERED_DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_kafka_offsets.operators import KafkaBatchOperator

with DAG("declared_options_rendered", schedule=None, start_date=datetime(2026, 1, 1),
         params=dict(cap=30, start="earliest", parts=2)):
    KafkaBatchOperator(
        task_id="batch",
        pipeline=PIPELINE,
        topics=TOPIC,
        output_root=OUTPUT_ROOT,
        max_records_per_batch="{{ params.cap }}",
        starting_offsets="{{ params.start }}",
        min_partitions="{{ params.parts }}",
    )
"""


@pytest.mark.parametrize("one_task_env", ["spark-connect"], indirect=True)
def test_the_one_task_operators_declared_options_are_rendered_as_templates(
    one_task_env, stack, ledger, tmp_path, monkeypatch
):
    """Declared options reach the steps rendered, under a real DAG run: a templated cap and start
    policy (pipeline options) shape the batch, a templated ``min_partitions`` (a read option) is read."""
    topic, pipeline = one_task_env
    dags = tmp_path / "dags"
    dags.mkdir()
    source = RENDERED_DAG
    for name, value in {"PIPELINE": pipeline, "TOPIC": topic, "OUTPUT_ROOT": str(tmp_path / "out")}.items():
        source = source.replace(name, repr(value))
    (dags / "declared_options_rendered.py").write_text(source)
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))  # the DAG bundle dag.test() syncs
    monkeypatch.setattr(settings, "DAGS_FOLDER", str(dags))  # the folder DagBag() reads
    produced = produce(stack.bootstrap_servers, topic, 90, partitions=3)
    run = run_dag("declared_options_rendered")
    (ti,) = run.get_task_instances()
    assert ti.state == "success"
    (batch,) = ledger.committed_batches(pipeline)
    assert batch.records_committed == 30
    assert [(r.start, r.end) for r in batch.plan.ranges] == [(0, 10)] * 3
    assert_exactly_once(committed_rows(ledger, pipeline), [p for p in produced if p["offset"] < 10])
