"""The freshness deadline (Airflow's Deadline Alerts) of an ingest DAG and its example DAG."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from airflow.sdk.definitions.deadline import DeadlineReference

from airflow_kafka_offsets import airflow_features
from airflow_kafka_offsets.errors import AirflowFeatureUnavailableError, InvalidPipelineSpecError
from airflow_kafka_offsets.triggers import freshness_deadline
from airflow_kafka_offsets.triggers.deadlines import async_callback


def test_the_example_dag_declares_a_15_minute_deadline_from_each_runs_logical_date():
    from ..dagbag import DagBag

    path = Path(__file__).resolve().parents[2] / "dags" / "kafka_ingest_deadline_example.py"
    bag = DagBag(dag_folder=str(path))
    assert bag.import_errors == {}
    dag = bag.dags["kafka_ingest_deadline_example"]
    (alert,) = dag.deadline
    assert alert.reference == DeadlineReference.DAGRUN_LOGICAL_DATE and alert.interval == timedelta(minutes=15)
    if airflow_features.available("deadline_variable_interval"):  # deadlines are named from Airflow 3.3 on
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
    alert = freshness_deadline("orders", timedelta(minutes=5), callback=async_callback(page_someone, {}))
    assert alert.callback.path == f"{__name__}.page_someone"
    with pytest.raises(InvalidPipelineSpecError):
        freshness_deadline("no spaces allowed", timedelta(minutes=5))


@pytest.mark.skipif(
    airflow_features.available("deadline_variable_interval"), reason="this Airflow has VariableInterval (3.3+)"
)
def test_a_deadline_read_from_a_variable_names_the_airflow_it_needs_where_airflow_lacks_it():
    with pytest.raises(
        AirflowFeatureUnavailableError, match=r"\(`VariableInterval`\).* needs Apache Airflow 3\.3 or later"
    ):
        freshness_deadline("orders", object())  # what a VariableInterval would be
