"""The Airflow layer in milliseconds: task wiring, XCom, templates, retries, on_kill, hooks.

Connections come from ``AIRFLOW_CONN_*`` variables (no metadata database); the service
functions the operators call are replaced, since what is checked here is the wiring.
The same operators run against the real stack in tests/integration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import structlog.testing
from airflow.sdk import DAG, Asset, AssetAlias
from airflow.sdk.api.datamodels._generated import DagRunType
from airflow.sdk.definitions.xcom_arg import PlainXComArg
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_kafka_offsets.airflow_features import airflow_version, available
from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, PartitionRange, PartitionReport
from airflow_kafka_offsets.errors import DataLossError, KafkaUnavailableError
from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook
from airflow_kafka_offsets.operators import (
    KafkaBatchCommitOperator,
    KafkaBatchPlanOperator,
    KafkaBatchSparkOperator,
    ingest,
    kafka_ingest_task_group,
)
from airflow_kafka_offsets.operators import commit as commit_step
from airflow_kafka_offsets.operators import plan as plan_step
from airflow_kafka_offsets.operators import read as read_step
from airflow_kafka_offsets.operators.base import AirflowFailException
from airflow_kafka_offsets.service.plan import PlanOutcome
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter

PLAN = BatchPlan("orders", 4, 0, (PartitionRange("orders", 0, 10, 20, 10),), "file:///out/orders/batch=4")


OUTPUT = {"format": "directory", "location": "file:///out", "table": None}
SINK = SimpleNamespace(describe=lambda: OUTPUT)


def context() -> dict[str, Any]:
    return {
        "ti": SimpleNamespace(dag_id="d", run_id="r", task_id="t", try_number=1, map_index=-1),
        "outlet_events": OutletEventAccessors(),
    }


class SpecLedger:
    """Just the ledger reads the operators make themselves: the stored spec's topics, the planned batch."""

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        yield SimpleNamespace(
            pipeline_spec=lambda pipeline: SimpleNamespace(topics=["orders"]),
            planned_batch_id=lambda pipeline: None,
        )


@pytest.fixture(autouse=True)
def connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        json.dumps(
            {
                "conn_type": "kafka",
                "extra": {
                    "bootstrap.servers": "127.0.0.1:9",
                    "sasl.password": "s3cret",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": "u",
                },
            }
        ),
    )
    for conn_id in ("SPARK_DEFAULT", "SP"):  # the read step reads its Spark connection before Spark runs
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id}", json.dumps({"conn_type": "spark", "host": "local[2]"}))


def test_task_group_wires_plan_read_commit_by_xcom() -> None:
    with DAG("wiring", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        kafka_ingest_task_group(
            "ingest",
            pipeline="orders",
            topics=["orders"],
            output_root="/out",
            kafka_conn_id="k",
            postgres_conn_id="pg",
            spark_conn_id="sp",
            plan_kwargs={"max_records_per_batch": 100},
            spark_kwargs={"min_partitions": 4},
        )
    plan, read, commit = (dag.get_task(f"ingest.{t}") for t in ("plan", "read", "commit"))
    assert read.upstream_task_ids == {"ingest.plan"}
    assert commit.upstream_task_ids == {"ingest.plan", "ingest.read"}
    for task in (read, commit):
        assert isinstance(task.batch_id, PlainXComArg)
        assert task.batch_id.operator is plan and task.batch_id.key == "return_value"
    assert (plan.kafka_conn_id, plan.postgres_conn_id, read.spark_conn_id) == ("k", "pg", "sp")
    assert {t.kafka_asset_server for t in (plan, read, commit)} == {None}
    assert plan.max_records_per_batch == 100 and read.min_partitions == 4
    for task in (plan, read, commit):
        assert {"pipeline", "kafka_conn_id", "postgres_conn_id", "ledger_schema"} <= set(task.template_fields)
    assert "spark_conn_id" in read.template_fields


def test_plan_operator_returns_the_batch_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake_plan(ledger: Any, spec: Any, offsets: Any, sink: Any, actor: Any, decode: Any = None) -> PlanOutcome:
        seen.update(spec=spec, actor=actor)
        return PlanOutcome(PLAN, replayed=True)

    monkeypatch.setattr(plan_step, "plan_batch", fake_plan)
    monkeypatch.setattr(
        KafkaBatchPlanOperator, "ledger", lambda self: SimpleNamespace(catalog_uri=None, schema="kafka_offsets")
    )
    op = KafkaBatchPlanOperator(
        task_id="plan",
        pipeline="orders",
        topics="orders, more",
        output_root=str(tmp_path),
        max_records_per_batch="250",
        on_data_loss="skip",
    )
    ctx = context()
    result = op.execute(ctx)
    assert result == {"pipeline": "orders", "batch_id": 4, "records_planned": 10, "replayed": True}
    assert set(seen["spec"].topics) == {"orders", "more"} and seen["spec"].max_records_per_batch == 250
    assert seen["spec"].on_data_loss.value == "skip"
    assert seen["actor"].run_id == "r" and seen["actor"].try_number == 1


def test_plan_operator_resolves_an_avro_reader_schema_through_the_registry_connection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """value_format (here a rendered template's JSON text) reaches the spec; the decoding resolved for the
    plan (through the registry connection the value_format names) is handed to plan_batch to record."""
    seen: dict[str, Any] = {}
    resolved = object()

    def fake_next_decode(ledger: Any, spec: Any, sink: Any, registry: Any) -> Any:
        seen.update(spec=spec, registry=registry)
        return resolved

    def fake_plan(ledger: Any, spec: Any, offsets: Any, sink: Any, actor: Any, decode: Any = None) -> PlanOutcome:
        seen["decode"] = decode
        return PlanOutcome(PLAN, replayed=False)

    monkeypatch.setattr(plan_step, "next_decode", fake_next_decode)
    monkeypatch.setattr(plan_step, "plan_batch", fake_plan)
    monkeypatch.setattr(
        KafkaBatchPlanOperator, "ledger", lambda self: SimpleNamespace(catalog_uri=None, schema="kafka_offsets")
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_SR",
        json.dumps({"conn_type": "kafka_offsets_schema_registry", "host": "http://127.0.0.1:9/apis/ccompat/v7"}),
    )
    op = KafkaBatchPlanOperator(
        task_id="plan",
        pipeline="orders",
        topics="orders",
        output_root=str(tmp_path),
        value_format='{"type": "avro", "registry_conn_id": "sr", "version": 2}',
    )
    assert "value_format" in op.template_fields
    op.execute(context())
    avro = seen["spec"].decode.avro
    assert (avro.registry_conn_id, avro.subject, avro.version) == ("sr", "orders-value", 2)
    assert seen["decode"] is resolved
    client = seen["registry"]("sr")  # the hook's client for the connection (nothing is asked yet)
    assert type(client).__name__ == "SchemaRegistryClient"


def test_errors_a_retry_cannot_fix_fail_the_task_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def lost(*args: Any) -> PlanOutcome:
        raise DataLossError("orders-0: offsets [10, 20) were deleted by retention")

    monkeypatch.setattr(plan_step, "plan_batch", lost)
    monkeypatch.setattr(
        KafkaBatchPlanOperator, "ledger", lambda self: SimpleNamespace(catalog_uri=None, schema="kafka_offsets")
    )
    op = KafkaBatchPlanOperator(task_id="plan", pipeline="orders", topics="orders", output_root=str(tmp_path))
    with pytest.raises(AirflowFailException, match=r"DataLossError: orders-0: offsets \[10, 20\) were deleted"):
        op.execute(context())

    def unreachable(*args: Any) -> PlanOutcome:
        raise KafkaUnavailableError("no broker answered in 30 s")

    monkeypatch.setattr(plan_step, "plan_batch", unreachable)
    with pytest.raises(KafkaUnavailableError):  # retryable: Airflow's retries apply
        op.execute(context())


def test_bad_options_fail_without_retry(tmp_path: Path) -> None:
    op = KafkaBatchPlanOperator(
        task_id="plan", pipeline="orders", topics="orders", output_root=str(tmp_path), max_records_per_batch="lots"
    )
    with pytest.raises(AirflowFailException, match="max_records_per_batch"):
        op.execute(context())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("None", None),
        ("", None),
        (3, 3),
        ("7", 7),
        ({"batch_id": 4, "pipeline": "p"}, 4),
        ({"batch_id": None}, None),
    ],
)
def test_batch_id_from_xcom_or_template(value: Any, expected: int | None) -> None:
    assert ingest.parse_batch_id(value) == expected


@pytest.mark.parametrize("value", ["two", 0, "-1"])
def test_bad_batch_id_is_named(value: Any) -> None:
    with pytest.raises(Exception, match="batch_id must be"):
        ingest.parse_batch_id(value)


def test_read_operator_passes_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(read_step, "load_batch", lambda ledger, pipeline, batch_id: PLAN if batch_id == 4 else None)
    monkeypatch.setattr(KafkaBatchSparkOperator, "ledger", lambda self: SpecLedger())
    monkeypatch.setattr(KafkaBatchSparkOperator, "sink_for", lambda self, ledger: SINK)
    monkeypatch.setattr(SparkBatchSubmitter, "check", lambda self: ((), ()))

    def fake_run(
        ledger: Any,
        sink: Any,
        plan: BatchPlan,
        submit: SparkBatchSubmitter,
        props: dict[str, str],
        actor: Any,
        min_partitions: int | None = None,
        lease_s: float = 0,
        wait_s: float = 0,
        offsets_source: Any = None,
    ) -> BatchReport:
        seen.update(settings=submit.settings, props=props, min_partitions=min_partitions, lease_s=lease_s)
        assert callable(offsets_source)  # records deleted before the read are refused before Spark
        return BatchReport("orders", 4, (PartitionReport("orders", 0, 9, 10, 18, 9, 90),), 900, "4.2.0")

    monkeypatch.setattr(read_step, "run_batch", fake_run)
    op = KafkaBatchSparkOperator(
        task_id="read",
        pipeline="orders",
        batch_id=4,
        spark_conn_id="sp",
        spark_jars="/j/a.jar,/j/b.jar",
        spark_conf={"spark.x": "1"},
        min_partitions="6",
        driver_memory="2g",
    )
    assert op.execute(context()) == {"pipeline": "orders", "batch_id": 4, "records_read": 9}
    settings: SparkSettings = seen["settings"]
    assert (settings.conn_id, settings.jars, dict(settings.conf), settings.driver_memory) == (
        "sp",
        ("/j/a.jar", "/j/b.jar"),
        {"spark.x": "1"},
        "2g",
    )
    assert seen["min_partitions"] == 6 and seen["lease_s"] == 120.0
    assert seen["props"]["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule")
    lineage = op.get_openlineage_facets_on_complete(None)
    assert lineage is not None
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("kafka://127.0.0.1:9", "orders")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("file", "/out/orders")]
    facet = lineage.run_facets["kafkaOffsets"]
    assert (facet.batchId, facet.records, facet.ranges) == (
        4,
        9,
        [{"topic": "orders", "partition": 0, "start": 10, "end": 20}],
    )
    assert op.inlets == [Asset(uri="kafka://127.0.0.1:9/orders")]
    op = KafkaBatchSparkOperator(task_id="read", pipeline="orders", batch_id=5)
    assert op.execute(context()) is None  # nothing to read: no Spark
    assert op.get_openlineage_facets_on_complete(None) is None and op.inlets == []


def test_the_read_step_reads_the_spark_connection_only_for_a_batch_that_reads_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch that only moves cursors runs no Spark job: a missing Spark connection does not fail it;
    one that reads records refuses the missing connection before the ledger records an attempt."""
    cursors_only = BatchPlan("orders", 4, 0, (PartitionRange("orders", 0, 20, 20, 20),), "file:///out/orders/b=4")
    plans = {4: cursors_only, 5: PLAN}
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT")
    monkeypatch.setattr(read_step, "load_batch", lambda ledger, pipeline, batch_id: plans[batch_id])
    monkeypatch.setattr(KafkaBatchSparkOperator, "ledger", lambda self: SpecLedger())
    monkeypatch.setattr(KafkaBatchSparkOperator, "sink_for", lambda self, ledger: SINK)
    submits: list[Any] = []
    monkeypatch.setattr(
        read_step, "run_batch", lambda ledger, sink, plan, submit, *args, **kwargs: submits.append(submit)
    )
    read = KafkaBatchSparkOperator(task_id="read", pipeline="orders", batch_id=4)
    assert read.execute(context()) == {"pipeline": "orders", "batch_id": 4, "records_read": 0}
    assert submits == [read_step.no_spark_job] and read._submitter is None
    with pytest.raises(AirflowFailException, match="Spark connection 'spark_default' is not defined in Airflow"):
        KafkaBatchSparkOperator(task_id="read", pipeline="orders", batch_id=5).execute(context())
    assert len(submits) == 1
    with pytest.raises(AssertionError, match="batch 4 reads no records: it has no Spark job to run"):
        read_step.no_spark_job({"batch_id": 4})


TOPIC_ASSETS = [Asset(uri="kafka://127.0.0.1:9/orders"), Asset(uri="kafka://127.0.0.1:9/refunds")]


def test_literal_topics_are_the_plan_tasks_inlets_when_the_dag_is_parsed() -> None:
    with DAG("parsed", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        kafka_ingest_task_group("ingest", pipeline="orders", topics="refunds,orders", output_root="/out")
    plan, read, commit = (dag.get_task(f"ingest.{t}") for t in ("plan", "read", "commit"))
    assert plan.inlets == TOPIC_ASSETS  # the first bootstrap server of kafka_default
    assert (read.inlets, commit.inlets) == ([], [])  # theirs are added when they handle a batch


def test_a_given_kafka_asset_server_names_the_topics_at_parse_and_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """No connection is read while parsing; the read step's run-time inlets and OpenLineage namespace
    use the same server, not the connection's (127.0.0.1:9), so each topic is one asset."""
    server = "kafka.example.com:9092"
    plan = KafkaBatchPlanOperator(
        task_id="plan",
        pipeline="orders",
        topics="orders",
        output_root="/out",
        kafka_conn_id="undefined",
        kafka_asset_server=server,
    )
    assert plan.inlets == [Asset(uri=f"kafka://{server}/orders")]
    monkeypatch.setattr(read_step, "load_batch", lambda ledger, pipeline, batch_id: PLAN)
    monkeypatch.setattr(KafkaBatchSparkOperator, "ledger", lambda self: SpecLedger())
    monkeypatch.setattr(KafkaBatchSparkOperator, "sink_for", lambda self, ledger: SINK)
    monkeypatch.setattr(SparkBatchSubmitter, "check", lambda self: ((), ()))
    report = BatchReport("orders", 4, (PartitionReport("orders", 0, 9, 10, 18, 9, 90),), 900, "4.2.0")
    monkeypatch.setattr(read_step, "run_batch", lambda *args, **kwargs: report)
    read = KafkaBatchSparkOperator(task_id="read", pipeline="orders", batch_id=4, kafka_asset_server=server)
    read.execute(context())
    assert read.inlets == plan.inlets
    lineage = read.get_openlineage_facets_on_complete(None)
    assert lineage is not None and [d.namespace for d in lineage.inputs] == [f"kafka://{server}"]


@pytest.mark.parametrize(
    ("kwargs", "level", "why"),
    [
        ({"topics": "{{ var.value.topic }}"}, "info", "'{{ var.value.topic }}' are no literal topic names"),
        ({"kafka_conn_id": "{{ var.value.c }}"}, "info", "the Kafka connection '{{ var.value.c }}' is templated"),
        ({"kafka_conn_id": "undefined"}, "warning", "Kafka connection 'undefined' is not defined in Airflow"),
        ({"kafka_conn_id": "bare"}, "warning", "Kafka connection 'bare' names no bootstrap.servers"),
    ],
)
def test_topics_unknown_while_parsing_leave_the_asset_graph_with_a_log_line(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, str], level: str, why: str
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_BARE", json.dumps({"conn_type": "kafka", "extra": {}}))
    with structlog.testing.capture_logs() as logs:
        plan = KafkaBatchPlanOperator(
            task_id="plan", pipeline="orders", output_root="/out", **{"topics": "orders", **kwargs}
        )
    assert plan.inlets == []
    (line,) = [log for log in logs if "asset graph" in log["event"]]
    assert line["log_level"] == level
    assert line["event"].startswith(f"plan: the Kafka topics are not in the DAG's asset graph ({why}")
    assert "when they handle a batch" in line["event"]


def test_on_kill_stops_the_running_spark_submit() -> None:
    killed: list[str] = []
    op = KafkaBatchSparkOperator(task_id="read", pipeline="orders")
    op.on_kill()  # nothing running yet: nothing to do
    op._submitter = SparkBatchSubmitter(SparkSettings(), SparkConnection("spark_default", "spark", "local[2]"))
    op._submitter._running = SimpleNamespace(on_kill=lambda: killed.append("spark-submit"))
    op.on_kill()
    assert killed == ["spark-submit"]


@pytest.mark.parametrize("committed_now", [True, False])
def test_commit_operator_reports_the_commit(monkeypatch: pytest.MonkeyPatch, committed_now: bool) -> None:
    outcome = SimpleNamespace(committed_now=committed_now, records=9, plan=PLAN, tables=None)
    monkeypatch.setattr(commit_step, "commit_batch", lambda ledger, sink, pipeline, batch_id, actor: outcome)
    monkeypatch.setattr(KafkaBatchCommitOperator, "ledger", lambda self: SpecLedger())
    monkeypatch.setattr(KafkaBatchCommitOperator, "sink_for", lambda self, ledger: SINK)
    monkeypatch.setattr(commit_step, "mirror_consumer_group", lambda op, ledger: None)
    op = KafkaBatchCommitOperator(task_id="commit", pipeline="orders", batch_id="4")
    assert op.outlets == [AssetAlias(name="kafka_offsets/orders")]  # declared for DAG parsing
    ctx = context()
    assert op.execute(ctx) == {
        "pipeline": "orders",
        "batch_id": 4,
        "records": 9,
        "committed_now": committed_now,
        "output_uri": "file:///out/orders/batch=4",
    }
    events = [e for accessor in ctx["outlet_events"]._dict.values() for e in accessor.asset_alias_events]
    if not committed_now:  # another run committed it: no event, no lineage from this one
        assert events == [] and op.get_openlineage_facets_on_complete(None) is None
        assert [o.uri for o in op.outlets if isinstance(o, Asset)] == []  # no partitioned event either
        return
    (event,) = events
    assert (event.source_alias_name, event.dest_asset_key.uri) == ("kafka_offsets/orders", "file:///out/orders")
    assert event.extra == {
        "pipeline": "orders",
        "batch_id": 4,
        "epoch": 0,
        "ranges": [{"topic": "orders", "partition": 0, "start": 10, "end": 20}],
        "records": 9,
        "output_uri": "file:///out/orders/batch=4",
        "output_location": "file:///out/orders",
        "output_format": "directory",
        "output_table": None,
    }
    # and one event on the pipeline's partitioned asset, keyed by the batch; an outlet only now
    batches = Asset(name="kafka_offsets_batches/orders", uri="kafka-offsets://orders/batches")
    assert batches in op.outlets
    keyed = ctx["outlet_events"][batches]
    assert keyed.extra == event.extra
    if available("partitioned_assets"):  # Airflow 3.2+
        assert keyed.partition_keys == {"batch=000000000004"}


def test_a_templated_pipeline_gets_its_alias_once_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KafkaBatchCommitOperator, "ledger", lambda self: SpecLedger())
    monkeypatch.setattr(KafkaBatchCommitOperator, "sink_for", lambda self, ledger: SINK)
    op = KafkaBatchCommitOperator(task_id="commit", pipeline="{{ var.value.p }}")
    assert op.outlets == []
    op.pipeline = "orders"  # as rendered
    assert op.execute(context()) is None  # nothing planned: nothing to commit, no event
    assert op.outlets == [AssetAlias(name="kafka_offsets/orders")]


def test_kafka_hook_reads_the_connection_without_a_database() -> None:
    hook = KafkaClusterHook()
    assert hook.client_config()["bootstrap.servers"] == "127.0.0.1:9"
    props = hook.spark_properties()
    assert props["security.protocol"] == "SASL_PLAINTEXT" and "s3cret" in props["sasl.jaas.config"]


def test_hooks_name_missing_or_incomplete_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Exception, match="PostgreSQL connection 'no_such_db' is not defined in Airflow"):
        LedgerHook("no_such_db").get_conn()
    monkeypatch.setenv("AIRFLOW_CONN_BARE", json.dumps({"conn_type": "kafka", "extra": {}}))
    with pytest.raises(
        Exception,
        match=re.escape(
            "Kafka connection 'bare' cannot be used: config['bootstrap.servers'] must be provided."
            " Fix its Config Dict (extra)."
        ),
    ):
        KafkaClusterHook("bare").client_config()
    with pytest.raises(Exception, match="Kafka connection 'no_such_kafka' is not defined in Airflow"):
        KafkaClusterHook("no_such_kafka").get_conn()
    with pytest.raises(Exception, match=r"Kafka connection 'bare' names no bootstrap.servers: add them"):
        KafkaClusterHook("bare").bootstrap_servers()
    assert KafkaClusterHook().bootstrap_servers() == "127.0.0.1:9"


def test_the_kafka_hook_is_the_apache_kafka_providers() -> None:
    """The ``kafka`` connection type (its form, its connection test) belongs to the apache-kafka
    provider; this package's hook extends that hook rather than declaring a parallel one."""
    from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
    from airflow.providers_manager import ProvidersManager

    try:
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    except ImportError:  # Airflow 3.1: the one providers manager
        ProvidersManagerTaskRuntime = ProvidersManager

    assert issubclass(KafkaClusterHook, KafkaBaseHook)
    assert KafkaClusterHook.test_connection is KafkaBaseHook.test_connection
    assert "conn_type" not in vars(KafkaClusterHook) and "get_ui_field_behaviour" not in vars(KafkaClusterHook)
    info = ProvidersManagerTaskRuntime().hooks["kafka"]
    assert info is not None
    assert (info.package_name, info.hook_class_name) == (
        "apache-airflow-providers-apache-kafka",
        "airflow.providers.apache.kafka.hooks.base.KafkaBaseHook",
    )
    # The UI form: the provider's own; Airflow 3.1's providers manager gathers the forms only where
    # flask_appbuilder is installed (it logs "UI widgets will be missing" otherwise), later lines always.
    assert KafkaBaseHook.get_ui_field_behaviour()["relabeling"] == {"extra": "Config Dict"}
    if not airflow_version().startswith("3.1."):
        assert ProvidersManager().field_behaviours["kafka"]["relabeling"] == {"extra": "Config Dict"}


def test_example_dags_import_without_errors() -> None:
    from ..dagbag import DagBag

    dags = Path(__file__).resolve().parents[2] / "dags"
    bag = DagBag(dag_folder=str(dags))
    assert bag.import_errors == {}
    # one DAG per file, named after it: the local stack waits for exactly these to be parsed
    defined = {str(p): p.stem for p in dags.glob("*.py")}
    if not available("partitioned_assets"):  # not defined before Airflow 3.2
        del defined[str(dags / "kafka_batch_partition_example.py")]
    assert {bag.dags[d].fileloc: d for d in bag.dag_ids} == defined
    # the ingest examples name their topic literally (the variable is read while parsing): inlets from the start
    assert bag.dags["kafka_ingest_example"].get_task("ingest.plan").inlets == [
        Asset(uri="kafka://127.0.0.1:9/demo-events")
    ]
    assert bag.dags["kafka_lag_ingest_example"].get_task("ingest.plan").inlets == [
        Asset(uri="kafka://127.0.0.1:9/lag-events")
    ]


@pytest.mark.parametrize("run_type", ["backfill", DagRunType.BACKFILL])
def test_an_ingest_step_in_a_backfill_run_is_refused_naming_what_to_do_instead(run_type: Any) -> None:
    from airflow_kafka_offsets.errors import BackfillRefusedError
    from airflow_kafka_offsets.operators.ingest import refuse_backfill

    with pytest.raises(BackfillRefusedError, match=r"ingest DAGs refuse backfills .* use the replay operation"):
        refuse_backfill({"dag_run": SimpleNamespace(run_type=run_type)}, "orders")
    for allowed in ("scheduled", "manual", DagRunType.ASSET_TRIGGERED):
        refuse_backfill({"dag_run": SimpleNamespace(run_type=allowed)}, "orders")
