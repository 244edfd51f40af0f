"""The freshness deadline (Airflow's Deadline Alerts) of an ingest DAG and its example DAG."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from airflow.sdk.definitions.callback import AsyncCallback
from airflow.sdk.definitions.deadline import DeadlineReference

from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.triggers import freshness_deadline


def test_the_example_dag_declares_a_15_minute_deadline_from_each_runs_logical_date():
    from airflow.dag_processing.dagbag import DagBag

    path = Path(__file__).resolve().parents[2] / "dags" / "kafka_ingest_deadline_example.py"
    bag = DagBag(dag_folder=str(path))
    assert bag.import_errors == {}
    dag = bag.dags["kafka_ingest_deadline_example"]
    (alert,) = dag.deadline
    assert alert.reference == DeadlineReference.DAGRUN_LOGICAL_DATE and alert.interval == timedelta(minutes=15)
    assert alert.name == "kafka_offsets_freshness_deadline_events"
    assert alert.callback.serialize() == {
        "path": "airflow_kafka_offsets.triggers.deadlines.freshness_missed",
        "kwargs": {
            "pipeline": "deadline_events",
            "kafka_config_id": "kafka_default",
            "postgres_conn_id": "postgres_default",
            "ledger_schema": None,
        },
    }
    assert sorted(dag.task_dict) == ["ingest.commit", "ingest.plan", "ingest.read"]


async def page_someone(context=None) -> None:
    """A user's own callback."""


def test_a_callback_of_ones_own_replaces_the_report_and_bad_pipeline_names_are_refused():
    alert = freshness_deadline("orders", timedelta(minutes=5), callback=AsyncCallback(page_someone))
    assert alert.callback.path == f"{__name__}.page_someone"
    with pytest.raises(InvalidPipelineSpecError):
        freshness_deadline("no spaces allowed", timedelta(minutes=5))
