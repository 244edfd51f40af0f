"""The one seam to Airflow (``airflow_kafka_offsets.runtime``): what it opens from connections and
the ``[kafka_offsets]`` config, and that nothing below it (service/ and what service uses) imports
Airflow or the config."""

from __future__ import annotations

import ast
import inspect
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets import config, runtime
from airflow_kafka_offsets.cli.arguments import operation_options
from airflow_kafka_offsets.core.operation_fields import operation, parse_request
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.access import s3_access, s3a_spark_conf
from airflow_kafka_offsets.operators import (
    KafkaBatchCommitOperator,
    KafkaBatchPlanOperator,
    KafkaBatchSparkOperator,
    KafkaPipelineOperationOperator,
    kafka_ingest_task_group,
)
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, AirflowRuntime, spark_settings
from airflow_kafka_offsets.service.context import OperationContext, SinkOpener
from airflow_kafka_offsets.spark.options import SparkJobOptions
from airflow_kafka_offsets.triggers import KafkaLagTrigger

PACKAGE = Path(airflow_kafka_offsets.__file__).parent
# service/ and the packages it works with: given values by the seam, they open nothing of Airflow's.
BELOW_THE_SEAM = ("service", "core", "ledger", "sinks", "clients", "object_storage")
AIRFLOW_FACING = ("config", "hooks", "runtime", "operators", "cli", "plugins", "triggers", "spark")

KAFKA = {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "PLAINTEXT"}}
S3_EXTRA = {"endpoint_url": "http://127.0.0.1:9000", "addressing_style": "path"}


def imported_modules(path: Path) -> Iterator[str]:
    """Every module a file imports, at its top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.fixture(autouse=True)
def no_stack_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests set the config and connections they mean: none left by the integration tests'
    stack (its ``[kafka_offsets]`` jars, object storage connection) when both run in one session."""
    for name in list(os.environ):
        if name.startswith(("AIRFLOW__KAFKA_OFFSETS__", "AIRFLOW_CONN_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("package", BELOW_THE_SEAM)
def test_nothing_below_the_seam_imports_airflow_or_the_config(package: str) -> None:
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for module in imported_modules(path):
            top = module.split(".")
            assert top[0] != "airflow", f"{path.relative_to(PACKAGE)} imports {module}"
            if top[0] == "airflow_kafka_offsets" and len(top) > 1:
                assert top[1] not in AIRFLOW_FACING, f"{path.relative_to(PACKAGE)} imports {module}"


def test_the_default_connection_ids_are_defined_once() -> None:
    from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

    from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook, ObjectStorageHook

    assert config.DEFAULT_KAFKA_CONN_ID == KafkaBaseHook.default_conn_name  # the apache-kafka provider's
    assert KafkaClusterHook().kafka_config_id == config.DEFAULT_KAFKA_CONN_ID
    assert LedgerHook().postgres_conn_id == LedgerHook.default_conn_name == config.DEFAULT_POSTGRES_CONN_ID
    assert ObjectStorageHook.default_conn_name == config.DEFAULT_OBJECT_STORAGE_CONN_ID
    assert SparkJobOptions().conn_id == config.DEFAULT_SPARK_CONN_ID
    defaults = {
        "kafka_conn_id": config.DEFAULT_KAFKA_CONN_ID,
        "postgres_conn_id": config.DEFAULT_POSTGRES_CONN_ID,
        "spark_conn_id": config.DEFAULT_SPARK_CONN_ID,
    }
    for function in (kafka_ingest_task_group, AirflowRuntime):
        params = inspect.signature(function).parameters
        assert {k: params[k].default for k in defaults if k in params} == {
            k: v for k, v in defaults.items() if k in params
        }
    read = KafkaBatchSparkOperator(task_id="read", pipeline="p")
    manual = KafkaPipelineOperationOperator(task_id="op", operation="status", pipeline="p")
    commit = KafkaBatchCommitOperator(task_id="commit", pipeline="p")
    for op in (read, manual, commit):
        assert op.kafka_conn_id == config.DEFAULT_KAFKA_CONN_ID
        assert op.postgres_conn_id == config.DEFAULT_POSTGRES_CONN_ID
    assert read.spark_conn_id == manual.spark_conn_id == config.DEFAULT_SPARK_CONN_ID
    trigger = KafkaLagTrigger(pipeline="p", topics="t", max_lag_records=1)
    assert (trigger.kafka_config_id, trigger.postgres_conn_id) == (
        config.DEFAULT_KAFKA_CONN_ID,
        config.DEFAULT_POSTGRES_CONN_ID,
    )
    cli = {o.flags[0]: o.kwargs.get("default") for o in operation_options(operation("replay"))}
    assert (cli["--kafka-conn-id"], cli["--postgres-conn-id"], cli["--spark-conn-id"]) == tuple(defaults.values())
    options = airflow_kafka_offsets.get_provider_info()["config"]["kafka_offsets"]["options"]
    assert options["ui_kafka_conn_id"]["default"] == config.DEFAULT_KAFKA_CONN_ID
    assert options["ui_postgres_conn_id"]["default"] == config.DEFAULT_POSTGRES_CONN_ID
    assert options["object_storage_conn_id"]["default"] == config.DEFAULT_OBJECT_STORAGE_CONN_ID
    assert options["ledger_schema"]["default"] == config.DEFAULT_LEDGER_SCHEMA


def test_the_ledger_is_opened_one_way_naming_a_missing_connection() -> None:
    with pytest.raises(ConfigurationError, match="PostgreSQL connection 'no_such_db' is not defined in Airflow"):
        AirflowRuntime(postgres_conn_id="no_such_db").ledger()
    with pytest.raises(ConfigurationError, match="PostgreSQL connection 'no_such_db' is not defined in Airflow"):
        AirflowRuntime(postgres_conn_id="no_such_db").ledger(migrate=False)


def test_the_ledgers_schema_comes_from_the_runtime_or_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PG", json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": 9}))
    assert AirflowRuntime(postgres_conn_id="pg", ledger_schema="mine").ledger(migrate=False).schema == "mine"
    assert AirflowRuntime(postgres_conn_id="pg").ledger(migrate=False).schema == config.DEFAULT_LEDGER_SCHEMA
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", "configured")
    ledger = AirflowRuntime(postgres_conn_id="pg").ledger(migrate=False)
    assert ledger.schema == "configured"
    assert "://127.0.0.1:9?connect_timeout=10&" in str(ledger.catalog_uri)  # Iceberg's, with the deadlines


def test_the_pipelines_page_and_the_trigger_open_the_ledger_through_the_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_kafka_offsets.plugins import pipelines_app

    opened: list[tuple[AirflowRuntime, bool]] = []
    monkeypatch.setattr(AirflowRuntime, "ledger", lambda self, migrate=True: opened.append((self, migrate)))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__UI_POSTGRES_CONN_ID", "ui_pg")
    pipelines_app._ledger.cache_clear()
    pipelines_app._ledger()
    pipelines_app._ledger.cache_clear()
    monkeypatch.setattr(AirflowRuntime, "kafka", lambda self, timeout_s=30.0: SimpleNamespace(offsets=lambda t: {}))
    trigger = KafkaLagTrigger(pipeline="p", topics="t", max_lag_records=1, postgres_conn_id="lag_pg", ledger_schema="s")
    with pytest.raises(AttributeError):  # the fake ledger is None: opened, then used
        trigger.read_state()
    assert opened == [
        (AirflowRuntime(postgres_conn_id="ui_pg"), False),
        (AirflowRuntime(postgres_conn_id="lag_pg", ledger_schema="s"), False),
    ]


def test_spark_settings_take_the_configs_defaults_and_s3_privately(monkeypatch: pytest.MonkeyPatch) -> None:
    options = SparkJobOptions("sp", conf={"spark.x": "1"}, executor_memory="2g")
    settings = spark_settings(options)
    assert (settings.conn_id, dict(settings.conf), settings.executor_memory) == ("sp", {"spark.x": "1"}, "2g")
    assert (settings.jars, settings.packages, settings.storage, dict(settings.private_conf)) == ((), (), None, {})
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__SPARK_JARS", "/c/a.jar, /c/b.jar")
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__SPARK_VERSION", "4.1.1")
    assert spark_settings(options).jars == ("/c/a.jar", "/c/b.jar")
    assert spark_settings(SparkJobOptions(jars=("/mine.jar",))).jars == ("/mine.jar",)  # given wins
    assert spark_settings(options).spark_version == "4.1.1"
    s3 = {"conn_type": "kafka_offsets_object_storage", "login": "KEY", "password": "SECRET", "extra": S3_EXTRA}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(s3))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID", "lake")
    on_s3 = spark_settings(options, "s3://bucket/out")
    assert on_s3.storage == s3_access("lake", "KEY", "SECRET", S3_EXTRA)
    assert dict(on_s3.private_conf) == s3a_spark_conf(on_s3.storage) and "SECRET" not in str(on_s3.conf)
    assert spark_settings(options, "/local/out").storage is None


def test_the_sinks_reach_s3_through_the_configured_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AIRFLOW_SINKS.object_storage("/local/out") is None
    with pytest.raises(ConfigurationError, match=r"S3 \(for s3://bucket/out\) connection 'aws_default' is not defined"):
        AIRFLOW_SINKS.object_storage("s3://bucket/out")
    with pytest.raises(ConfigurationError, match="'catalog_pg' is not defined in Airflow"):
        AIRFLOW_SINKS.external_catalog("catalog_pg")
    # without the seam, service knows local paths only, and says so
    with pytest.raises(ConfigurationError, match="s3://bucket/out is on object storage, but no object storage"):
        SinkOpener().directory("s3://bucket/out")
    assert str(SinkOpener().directory("/local/out").root) == "/local/out"


class OutputRootLedger:
    @contextmanager
    def transaction(self) -> Iterator[Any]:
        yield SimpleNamespace(output_root=lambda pipeline: f"/out/{pipeline}")


@pytest.mark.parametrize(("name", "uses_spark"), [("status", False), ("replay", True), ("catch_up", True)])
def test_an_operations_context_has_spark_only_when_it_runs_spark(
    monkeypatch: pytest.MonkeyPatch, name: str, uses_spark: bool
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps(KAFKA))
    ledger = OutputRootLedger()
    monkeypatch.setattr(AirflowRuntime, "ledger", lambda self, migrate=True: ledger)
    made: list[str] = []

    def spark(output_root: str) -> Any:
        made.append(output_root)
        return "runner"

    options = {"replay_first_batch": 1} if name == "replay" else {}
    request = parse_request({"operation": name, "pipeline": "orders", **options})
    ctx = AirflowRuntime().operation_context(request, {"cli": "test"}, spark)
    assert isinstance(ctx, OperationContext)
    assert (ctx.ledger, ctx.actor, ctx.sinks) == (ledger, {"cli": "test"}, AIRFLOW_SINKS)
    if uses_spark:
        assert (made, ctx.submit, ctx.spark(name)) == (["/out/orders"], "runner", "runner")
        assert ctx.kafka_properties["bootstrap.servers"] == "127.0.0.1:9"
    else:
        assert (made, ctx.submit, dict(ctx.kafka_properties)) == ([], None, {})
        with pytest.raises(ConfigurationError, match="status runs Spark jobs, but no Spark was given"):
            ctx.spark("status")


def test_the_plan_operator_checks_spark_through_the_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[SparkJobOptions] = []

    def runner(options: SparkJobOptions, output_root: str | None = None) -> Any:
        checked.append(options)
        raise ConfigurationError("checked")

    monkeypatch.setattr("airflow_kafka_offsets.operators.plan.spark_runner", runner)
    op = KafkaBatchPlanOperator(
        task_id="plan", pipeline="p", topics="t", output_root="/out", spark_conn_id="sp", spark_jars="/a.jar"
    )
    with pytest.raises(Exception, match="ConfigurationError: checked"):
        op.execute({})
    assert checked == [SparkJobOptions("sp", jars=("/a.jar",))]
    assert runtime.KAFKA_TIMEOUT_S == op.kafka_timeout_s
