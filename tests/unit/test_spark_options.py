"""One value for the Spark options: the read operator, the manual operations operator and the CLI
take the same ones, the plan operator the connection and connector; both Spark operators stop their
running Spark job when the task is killed."""

from __future__ import annotations

import inspect
import json
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_kafka_offsets.cli import build_parser
from airflow_kafka_offsets.cli.arguments import operation_options
from airflow_kafka_offsets.core.operation_fields import OPERATIONS
from airflow_kafka_offsets.operators import (
    KafkaBatchPlanOperator,
    KafkaBatchSparkOperator,
    KafkaPipelineOperationOperator,
    kafka_ingest_task_group,
)
from airflow_kafka_offsets.operators import manual as manual_module
from airflow_kafka_offsets.operators.base import SparkConnectorOperator, SparkJobOperator
from airflow_kafka_offsets.runtime import AirflowRuntime
from airflow_kafka_offsets.spark.options import (
    CONNECTOR_PARAMS,
    SPARK_PARAMS,
    SPARK_TEMPLATE_FIELDS,
    SparkJobOptions,
)
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter

GIVEN: dict[str, Any] = {
    "spark_conn_id": "sp",
    "spark_conf": {"spark.sql.shuffle.partitions": "8", "spark.x": "a=b"},
    "spark_jars": "/j/a.jar,/j/b.jar",
    "spark_packages": None,
    "executor_cores": 2,
    "executor_memory": "4g",
    "driver_memory": "2g",
    "num_executors": 3,
    "total_executor_cores": 6,
}
EXPECTED = SparkJobOptions(
    "sp",
    conf={"spark.sql.shuffle.partitions": "8", "spark.x": "a=b"},
    jars=("/j/a.jar", "/j/b.jar"),
    executor_cores=2,
    executor_memory="4g",
    driver_memory="2g",
    num_executors=3,
    total_executor_cores=6,
)
CLI_ARGS = [
    "--spark-conn-id",
    "sp",
    "--spark-conf",
    "spark.sql.shuffle.partitions=8",
    "--spark-conf",
    "spark.x=a=b",
    "--spark-jars",
    "/j/a.jar,/j/b.jar",
    "--executor-cores",
    "2",
    "--executor-memory",
    "4g",
    "--driver-memory",
    "2g",
    "--num-executors",
    "3",
    "--total-executor-cores",
    "6",
]


def init_params(cls: type) -> set[str]:
    return {name for c in cls.__mro__ if "__init__" in vars(c) for name in inspect.signature(c.__init__).parameters}


def test_every_spark_option_is_a_parameter_of_both_spark_operators_and_an_option_of_the_cli() -> None:
    spark_classes = (SparkConnectorOperator, SparkJobOperator)
    own = {name for cls in spark_classes for name in inspect.signature(cls.__init__).parameters}
    assert own - {"self", "kwargs"} == set(SPARK_PARAMS)
    for cls in (KafkaBatchSparkOperator, KafkaPipelineOperationOperator):
        assert issubclass(cls, SparkJobOperator) and set(SPARK_PARAMS) <= init_params(cls)
        assert set(SPARK_TEMPLATE_FIELDS) <= set(cls.template_fields)
        assert cls.template_fields_renderers["spark_conf"] == "json"
    assert issubclass(KafkaBatchPlanOperator, SparkConnectorOperator)
    assert not issubclass(KafkaBatchPlanOperator, SparkJobOperator)
    assert set(CONNECTOR_PARAMS) <= set(KafkaBatchPlanOperator.template_fields)
    for op in OPERATIONS:
        dests = {o.kwargs.get("dest", o.flags[0].lstrip("-").replace("-", "_")) for o in operation_options(op)}
        if op.uses_spark:
            assert set(SPARK_PARAMS) <= dests, op.name
        else:
            assert not set(SPARK_PARAMS) & dests, op.name


@pytest.mark.parametrize("operator", [KafkaBatchSparkOperator, KafkaPipelineOperationOperator])
def test_the_operators_and_the_cli_make_the_same_options(operator: type) -> None:
    extra = {"operation": "replay"} if operator is KafkaPipelineOperationOperator else {}
    op = operator(task_id="t", pipeline="p", **extra, **GIVEN)
    assert op.spark_options() == EXPECTED
    for command in ("replay", "catch-up"):
        args = build_parser().parse_args([command, "p", *CLI_ARGS])
        assert SparkJobOptions.from_params(args) == EXPECTED
    assert SparkJobOptions.from_params(build_parser().parse_args(["replay", "p"])) == SparkJobOptions()
    assert op.spark_options().connector() == SparkJobOptions("sp", jars=("/j/a.jar", "/j/b.jar"))


def test_the_options_become_spark_settings_with_their_resources() -> None:
    settings = EXPECTED.settings(default_jars=("/default.jar",), default_packages=("g:a:1",), spark_version="4.1.1")
    assert settings == SparkSettings(
        conn_id="sp",
        jars=("/j/a.jar", "/j/b.jar"),
        packages=("g:a:1",),
        conf={"spark.sql.shuffle.partitions": "8", "spark.x": "a=b"},
        executor_cores=2,
        executor_memory="4g",
        driver_memory="2g",
        num_executors=3,
        total_executor_cores=6,
        spark_version="4.1.1",
    )


def test_a_spark_conf_that_is_no_key_value_pair_exits_2_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["replay", "p", "--spark-conf", "spark.x"])
    assert exit_info.value.code == 2
    assert "argument --spark-conf: expected KEY=VALUE" in capsys.readouterr().err


def test_the_task_group_checks_the_read_steps_connector_before_planning() -> None:
    with DAG("spark_options", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        kafka_ingest_task_group(
            "ingest",
            pipeline="orders",
            topics=["orders"],
            output_root="/out",
            kafka_asset_server="k:9092",
            spark_conn_id="sp",
            spark_kwargs={key: value for key, value in GIVEN.items() if key != "spark_conn_id"},
        )
    plan, read = dag.get_task("ingest.plan"), dag.get_task("ingest.read")
    assert read.spark_options() == EXPECTED
    assert plan.spark_options() == EXPECTED.connector()


def test_killing_a_manual_operation_stops_its_running_spark_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    killed: list[str] = []
    runners: list[Any] = []

    def operation_context(self: AirflowRuntime, request: Any, actor: Any, spark: Any) -> Any:
        runner = spark("/out/orders")  # as the seam does for replay and catch-up
        runners.append(runner)
        return SimpleNamespace(submit=runner)

    def run_operation(request: Any, ctx: Any) -> Any:
        ctx.submit._running = SimpleNamespace(on_kill=lambda: killed.append("spark-submit"))  # submitted
        op.on_kill()  # Airflow kills the task meanwhile
        return SimpleNamespace(data={}, text="")

    monkeypatch.setattr(AirflowRuntime, "operation_context", operation_context)
    monkeypatch.setattr(manual_module, "run_operation", run_operation)
    op = KafkaPipelineOperationOperator(
        task_id="op", operation="catch_up", pipeline="orders", executor_memory="1g", spark_jars="/j/a.jar"
    )
    op.on_kill()  # nothing running yet: nothing to do
    op.execute({})
    (runner,) = runners
    assert isinstance(runner, SparkBatchSubmitter)
    assert (runner.settings.jars, runner.settings.executor_memory) == (("/j/a.jar",), "1g")
    assert killed == ["spark-submit"]
