"""The smoke of one Airflow line, run on every supported line (scripts/airflow-matrix runs it in a venv per
line; the main run covers the pinned one): the features this Airflow has are the ones the package
declares for its line, a batch runs through the task group under ``airflow dags test`` and through the
one-task form, the CLI answers ``status --json``, and Airflow's own API app serves the Kafka pipelines page
(the manual-operations DAG's status and reset dry run: test_manual_ops_ui.py, from the trigger form of a
real deployment, also part of the smoke). Each test's outcome and the features
found go to ``out/airflow-lines/<line>.json`` (conftest), which docs/airflow.md's table is made from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airflow_kafka_offsets import airflow_features
from airflow_kafka_offsets.core.spec import build_spec

from . import pipeline
from .helpers import assert_exactly_once, committed_rows, dag_bag, new_ledger, produce, run_dag, topic_maker
from .pipeline import run_once

pytestmark = pytest.mark.airflow_line

BIN = Path(sys.executable).parent


@pytest.fixture()
def on_spark_connect(monkeypatch, spark_connect: str) -> None:
    """The DAGs' read steps on the warm Spark Connect server (spark-submit is covered by the main suite)."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])


def test_the_features_found_are_the_ones_declared_for_this_line():
    assert airflow_features.detected() == airflow_features.declared(airflow_features.airflow_line())


def test_every_example_dag_parses():
    bag = dag_bag()
    assert bag.import_errors == {}
    expected = {
        "kafka_batch_consumer_example",
        "kafka_ingest_deadline_example",
        "kafka_ingest_example",
        "kafka_ingest_one_task_example",
        "kafka_lag_ingest_example",
        "kafka_offsets_manual_ops",
        "kafka_retention_warning_example",
    }
    if airflow_features.available("partitioned_assets"):
        expected.add("kafka_batch_partition_example")
    assert set(bag.dag_ids) == expected


def test_a_batch_through_the_task_group_under_airflow_dags_test(
    stack, airflow_db, ledger, schema, make_topic, monkeypatch, tmp_path, on_spark_connect
):
    topic = make_topic(partitions=2)
    pipeline = f"line_{schema}"
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC", topic)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE", pipeline)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", schema)
    produced = produce(stack.bootstrap_servers, topic, 40, partitions=2)
    done = subprocess.run(
        [str(BIN / "airflow"), "dags", "test", "kafka_ingest_example"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (batch,) = ledger.committed_batches(pipeline)
    assert batch.records_committed == 40
    assert [(r.start, r.end) for r in batch.plan.ranges] == [(0, 20), (0, 20)]
    assert_exactly_once(committed_rows(ledger, pipeline), produced)


def test_a_batch_through_the_one_task_form(
    stack, airflow_db, ledger, schema, make_topic, monkeypatch, tmp_path, on_spark_connect
):
    topic = make_topic(partitions=1)
    pipeline = f"line_one_{schema}"
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_ONE_TASK_TOPIC", topic)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_ONE_TASK_PIPELINE", pipeline)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_ONE_TASK_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", schema)
    produced = produce(stack.bootstrap_servers, topic, 25, partitions=1)
    run = run_dag("kafka_ingest_one_task_example")
    assert [(ti.task_id, ti.state) for ti in run.get_task_instances()] == [("batch", "success")]
    (batch,) = ledger.committed_batches(pipeline)
    assert batch.records_committed == 25
    assert_exactly_once(committed_rows(ledger, pipeline), produced)


@pytest.fixture(scope="module")
def committed_pipeline(stack, spark_connect, tmp_path_factory) -> str:
    """Pipeline ``line_ops`` with one committed batch of 6 records on one partition, in a ledger schema of
    the module's (one batch for the three tests that read it); returns that schema."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    topic = topic_maker(AdminClient({"bootstrap.servers": stack.bootstrap_servers}))(partitions=1)
    produce(stack.bootstrap_servers, topic, 6, partitions=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "SPARK_CONN_ID", spark_connect)
        run_once(new_ledger(stack, schema), build_spec("line_ops", [topic], str(tmp_path_factory.mktemp("ops"))), stack)
    return schema


def test_the_cli_status_json(committed_pipeline):
    out = subprocess.run(
        [str(BIN / "airflow-kafka-offsets"), "status", "line_ops", "--ledger-schema", committed_pipeline, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    status = json.loads(out.stdout)
    assert [(p["partition"], p["committed_offset"], p["lag_records"]) for p in status["partitions"]] == [(0, 6, 0)]
    assert [(b["batch_id"], b["state"], b["records_committed"]) for b in status["batches"]] == [(1, "committed", 6)]


def test_airflow_kafka_offsets_in_airflows_cli_where_airflow_has_provider_commands(committed_pipeline):
    out = subprocess.run(
        [str(BIN / "airflow"), "kafka-offsets", "status", "line_ops", "--ledger-schema", committed_pipeline, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if airflow_features.available("provider_cli"):
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout)["partitions"][0]["committed_offset"] == 6
    else:
        assert out.returncode != 0 and "kafka-offsets" in out.stderr


def test_airflows_api_app_serves_the_kafka_pipelines_page(committed_pipeline, airflow_db, stack, monkeypatch):
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", committed_pipeline)
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    client = TestClient(create_app())
    assert client.get("/kafka-pipelines/").status_code == 401  # Airflow's authentication guards it
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    page = client.get("/kafka-pipelines/", headers={"Authorization": f"Bearer {token}"})
    assert page.status_code == 200, page.text[-2000:]
    assert "line_ops" in page.text
