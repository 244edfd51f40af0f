"""Thin operators over :mod:`airflow_kafka_offsets.service.batches`.

Use them separately (the batch id travels by XCom) or through
:func:`kafka_ingest_task_group`. A retried or re-run task replays the planned
batch; a batch committed by another run is reported, not written again.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from airflow.sdk import BaseOperator, Context, TaskGroup, XComArg
from airflow.sdk.exceptions import AirflowFailException

from airflow_kafka_offsets.config import config_value, ledger_schema, spark_settings
from airflow_kafka_offsets.core.model import BatchPlan
from airflow_kafka_offsets.core.spec import build_spec, validate_pipeline_name
from airflow_kafka_offsets.core.values import optional_int
from airflow_kafka_offsets.errors import (
    NOT_RETRYABLE,
    BackfillRefusedError,
    ConfigurationError,
    InvalidPipelineSpecError,
)
from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook
from airflow_kafka_offsets.hooks.schema_registry import registry_clients
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.lineage import (
    BatchLineage,
    kafka_server,
    literal_topics,
    openlineage_parent_conf,
    output_asset,
    pipeline_output_alias,
    topic_asset,
)
from airflow_kafka_offsets.service.batches import commit_batch, load_batch, plan_batch, run_batch
from airflow_kafka_offsets.service.decoding import next_decode
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S, DEFAULT_WAIT_S
from airflow_kafka_offsets.service.operations import pipeline_sink, sink_for_spec
from airflow_kafka_offsets.sinks import Sink
from airflow_kafka_offsets.spark.runner import BatchRunner, batch_runner
from airflow_kafka_offsets.spark.settings import SparkSettings

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


def refuse_backfill(context: Mapping[str, Any], pipeline: str) -> None:
    """A backfill run would ingest what the cursor points at, not its data interval: refuse it."""
    run_type = getattr(context.get("dag_run"), "run_type", None)
    if getattr(run_type, "value", run_type) == "backfill":
        raise BackfillRefusedError(
            f"pipeline {pipeline!r}: a backfill run would ingest whatever follows the pipeline's cursor, not "
            "its data interval, so ingest DAGs refuse backfills (allowed_run_types); to re-read past records use "
            "the replay operation (by batch, offsets or time window), to move the cursor use reset"
        )


def actor_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """Which Airflow run and try did this, for the ledger's audit trail."""
    ti = context.get("ti")
    return {
        "dag_id": getattr(ti, "dag_id", None),
        "run_id": getattr(ti, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "try_number": getattr(ti, "try_number", None),
        "map_index": getattr(ti, "map_index", None),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
    }


def parse_batch_id(value: Any) -> int | None:
    """A batch id: the plan task's result (through its XComArg), an int, or a user's template
    ('None' when nothing was planned)."""
    if isinstance(value, Mapping):
        value = value.get("batch_id")
    try:
        return optional_int(value, "batch_id", minimum=1)
    except InvalidPipelineSpecError as exc:
        raise ConfigurationError(str(exc)) from None


class PlanOptions(TypedDict, total=False):
    """Pipeline options for :class:`KafkaBatchPlanOperator` (``plan_kwargs`` of the task group).

    starting_offsets: where a new pipeline starts: ``earliest`` | ``latest`` | ``error``.
    new_partition_offsets: where partitions added later start (same choices).
    on_data_loss: ``fail`` | ``skip`` when retention deleted records the pipeline has not read.
    max_records_per_batch / max_records_per_partition: caps on offset spans per batch.
    consumer_group: mirror the cursor into this Kafka consumer group after each commit (for lag monitors).
    json_schema / max_decode_errors: optional JSON decode step (a Spark DDL schema) and its error budget.
    value_format: Avro values through a schema registry instead (``{"type": "avro", "subject": ...}``).
    kafka_timeout_s: how long to wait for Kafka's answers while planning.
    """

    starting_offsets: str
    new_partition_offsets: str
    on_data_loss: str
    max_records_per_batch: int | str | None
    max_records_per_partition: int | str | None
    consumer_group: str | None
    json_schema: str | None
    max_decode_errors: int | str | None
    value_format: Mapping[str, Any] | str | None
    kafka_timeout_s: float


class SparkOptions(TypedDict, total=False):
    """Spark settings for :class:`KafkaBatchSparkOperator` (``spark_kwargs`` of the task group).

    spark_conf: extra ``--conf`` settings; spark_jars / spark_packages: the Kafka connector
    (default: the ``[kafka_offsets]`` config, else ``--packages`` for the local pyspark);
    min_partitions: Spark tasks for the read (default: at least one per core); the rest are
    spark-submit's own options.
    """

    spark_conf: Mapping[str, str] | None
    spark_jars: str | Sequence[str] | None
    spark_packages: str | Sequence[str] | None
    min_partitions: int | str | None
    executor_cores: int | None
    executor_memory: str | None
    driver_memory: str | None
    num_executors: int | None
    total_executor_cores: int | None


class KafkaOffsetsBaseOperator(BaseOperator):
    """Connections shared by every operator of this package; errors a retry cannot fix fail at once.

    :param pipeline: the pipeline's name in the ledger (templated).
    :param kafka_conn_id: the Kafka connection (the apache-kafka provider's ``kafka`` type).
    :param postgres_conn_id: the PostgreSQL connection of the ledger database.
    :param ledger_schema: the ledger's schema (default: ``[kafka_offsets] ledger_schema``).
    """

    template_fields: Sequence[str] = ("pipeline", "kafka_conn_id", "postgres_conn_id", "ledger_schema")

    def __init__(
        self,
        *,
        pipeline: str,
        kafka_conn_id: str = "kafka_default",
        postgres_conn_id: str = "postgres_default",
        ledger_schema: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.kafka_conn_id = kafka_conn_id
        self.postgres_conn_id = postgres_conn_id
        self.ledger_schema = ledger_schema

    def execute(self, context: Context) -> Any:
        try:
            return self.run(context)
        except NOT_RETRYABLE as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc

    def run(self, context: Context) -> Any:
        raise NotImplementedError

    def ledger(self) -> Ledger:
        return LedgerHook(self.postgres_conn_id, ledger_schema(self.ledger_schema)).get_conn()

    def sink_for(self, ledger: Ledger) -> Sink:
        return pipeline_sink(ledger, self.pipeline)


NOT_IN_ASSET_GRAPH = (
    "%s: the Kafka topics are not in the DAG's asset graph (%s); the read and commit tasks name them as inlets "
    "when they handle a batch"
)


class KafkaTopicAssetsOperator(KafkaOffsetsBaseOperator):
    """A step of a pipeline that reads Kafka: it names the pipeline's topics as the assets
    ``kafka://<server>/<topic>``, the same URIs whether declared when the DAG is parsed or added
    when the task runs (so Airflow never holds two assets for one topic).

    :param kafka_asset_server: the server in those URIs and in OpenLineage namespaces (default: the
        first bootstrap server of the Kafka connection). Give it when the dag-processor cannot read
        the connection; then parsing does not read it either.
    """

    def __init__(self, *, kafka_asset_server: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_asset_server = kafka_asset_server

    def asset_server(self) -> str:
        """The server naming the topics: the one given, else the connection's first bootstrap server."""
        if self.kafka_asset_server:
            return self.kafka_asset_server
        return kafka_server(KafkaClusterHook(self.kafka_conn_id).bootstrap_servers())

    def declare_topic_inlets(self, topics: object) -> None:
        """At parse time: the topics as the task's inlets, so Airflow's asset graph shows them before any
        run. Not when a template names the topics or the Kafka connection, or the connection cannot be
        read while parsing: a log line says why, and the read and commit steps name them when they run."""
        names = literal_topics(topics)
        if names is None:
            self.log.info(NOT_IN_ASSET_GRAPH, self.task_id, f"{topics!r} are no literal topic names")
        elif not self.kafka_asset_server and "{{" in self.kafka_conn_id:
            self.log.info(NOT_IN_ASSET_GRAPH, self.task_id, f"the Kafka connection {self.kafka_conn_id!r} is templated")
        else:
            try:
                server = self.asset_server()
            except ConfigurationError as exc:
                self.log.warning(
                    NOT_IN_ASSET_GRAPH + "; give kafka_asset_server to name their server",
                    self.task_id,
                    str(exc).rstrip("."),
                )
            else:
                self.inlets = [*self.inlets, *(topic_asset(server, t) for t in names)]


class KafkaBatchStepOperator(KafkaTopicAssetsOperator):
    """Tells Airflow and OpenLineage what the step read and wrote when it handled a batch: the
    pipeline's topics (as the task's inlets), its output, and the batch."""

    _lineage: BatchLineage | None = None

    def pipeline_lineage(self, ledger: Ledger, sink: Sink) -> BatchLineage:
        """The pipeline's topics and output, looked up before the step changes anything (a lookup
        that fails then fails the step before it reads or commits, not after)."""
        with ledger.transaction() as tx:
            topics = tx.pipeline_spec(self.pipeline).topics
        return BatchLineage(self.pipeline, self.asset_server(), tuple(topics), sink.describe())

    def handled(self, lineage: BatchLineage, plan: BatchPlan, records: int) -> BatchLineage:
        """The batch this run read or committed: the task's inlets and its OpenLineage COMPLETE event."""
        self._lineage = handled = replace(lineage, plan=plan, records=records)
        self.inlets = [*self.inlets, *(a for a in handled.inlets() if a not in self.inlets)]
        return handled

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """Kafka topics in, the output out, and the ``kafkaOffsets`` run facet; nothing when this run
        read or committed no batch (nothing new, or another run had done it)."""
        return self._lineage.openlineage() if self._lineage is not None else None


class KafkaBatchPlanOperator(KafkaTopicAssetsOperator):
    """Write the next batch's exact offset ranges to the ledger, or return the batch already planned.

    Returns ``{"pipeline", "batch_id", "records_planned", "replayed"}``; ``batch_id`` is None when
    Kafka holds nothing new. Pass the task's ``output`` as ``batch_id`` of the read and commit steps.
    Literal topics are the task's inlets from the moment the DAG is parsed
    (:meth:`KafkaTopicAssetsOperator.declare_topic_inlets`).

    :param topics: the pipeline's topics (a list, or a comma-separated string; templated).
    :param output_root: where batch N lands, as ``<root>/<pipeline>/batch=<N>/`` with the directory sink;
        the warehouse of new Iceberg tables; the parent of the Delta table (templated).
    :param sink: ``directory`` (default), or a table: ``{"format": "iceberg" | "delta", "table": "ns.name"}``.
    :param starting_offsets: where a new pipeline starts: ``earliest`` | ``latest`` | ``error``.
    :param new_partition_offsets: where partitions added later start (same choices).
    :param on_data_loss: ``fail`` | ``skip`` when retention deleted records not yet read.
    :param max_records_per_batch: cap on the batch's offset span, shared max-min fairly.
    :param max_records_per_partition: cap on each partition's offset span.
    :param consumer_group: mirror the cursor into this Kafka consumer group after each commit.
    :param json_schema: a Spark DDL schema: decode values as JSON into ``decoded``.
    :param value_format: ``{"type": "avro", "registry_conn_id": ..., "subject": ..., "version": "latest" | N}``:
        decode Avro values (Confluent wire format) with a reader schema from a schema registry.
    :param max_decode_errors: fail the batch when more records than this cannot be decoded.
    :param kafka_timeout_s: how long to wait for Kafka's answers.
    :param spark_conn_id: when set, the Spark connection the batch will run on is checked before anything
        is planned (its Spark's version against the connector in ``spark_jars`` / ``spark_packages``, a
        Spark Connect server's version against this worker's client); the task group sets it.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        "spark_conn_id",
        "spark_jars",
        "spark_packages",
        "topics",
        "output_root",
        "sink",
        "starting_offsets",
        "new_partition_offsets",
        "on_data_loss",
        "max_records_per_batch",
        "max_records_per_partition",
        "consumer_group",
        "json_schema",
        "max_decode_errors",
        "value_format",
    )
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        topics: Sequence[str] | str,
        output_root: str,
        sink: str | Mapping[str, Any] | None = None,
        starting_offsets: str = "earliest",
        new_partition_offsets: str = "earliest",
        on_data_loss: str = "fail",
        max_records_per_batch: int | str | None = None,
        max_records_per_partition: int | str | None = None,
        consumer_group: str | None = None,
        json_schema: str | None = None,
        max_decode_errors: int | str | None = None,
        value_format: Mapping[str, Any] | str | None = None,
        kafka_timeout_s: float = 30.0,
        spark_conn_id: str | None = None,
        spark_jars: str | Sequence[str] | None = None,
        spark_packages: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spark_conn_id = spark_conn_id
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.topics = topics
        self.output_root = output_root
        self.sink = sink
        self.starting_offsets = starting_offsets
        self.new_partition_offsets = new_partition_offsets
        self.on_data_loss = on_data_loss
        self.max_records_per_batch = max_records_per_batch
        self.max_records_per_partition = max_records_per_partition
        self.consumer_group = consumer_group
        self.json_schema = json_schema
        self.max_decode_errors = max_decode_errors
        self.value_format = value_format
        self.kafka_timeout_s = kafka_timeout_s
        self.declare_topic_inlets(topics)

    def run(self, context: Context) -> dict[str, Any]:
        refuse_backfill(context, self.pipeline)
        spec = build_spec(
            self.pipeline,
            self.topics,
            self.output_root,
            starting_offsets=self.starting_offsets,
            new_partition_offsets=self.new_partition_offsets,
            on_data_loss=self.on_data_loss,
            max_records_per_batch=self.max_records_per_batch,
            max_records_per_partition=self.max_records_per_partition,
            consumer_group=self.consumer_group,
            json_schema=self.json_schema,
            max_decode_errors=self.max_decode_errors,
            sink=self.sink,
            value_format=self.value_format,
        )
        if self.spark_conn_id:
            batch_runner(spark_settings(self.spark_conn_id, jars=self.spark_jars, packages=self.spark_packages)).check()
        ledger = self.ledger()
        sink = sink_for_spec(ledger, spec)
        decode = next_decode(ledger, spec, sink, registry_clients(f"for pipeline {spec.name}"))
        kafka = KafkaClusterHook(self.kafka_conn_id, timeout_s=self.kafka_timeout_s).get_conn()
        outcome = plan_batch(ledger, spec, kafka.offsets, sink, actor_from_context(context), decode)
        plan = outcome.plan
        return {
            "pipeline": spec.name,
            "batch_id": plan.batch_id if plan else None,
            "records_planned": plan.records_planned if plan else 0,
            "replayed": outcome.replayed,
        }


class KafkaBatchSparkOperator(KafkaBatchStepOperator):
    """Read the batch's ranges with Spark into a staging location and check Spark's report.

    Nothing runs when there is no batch, the batch is already committed, or it reads no
    records; no second Spark job runs when another run's attempt has read the batch or is
    reading it (this one waits, ``[kafka_offsets] attempt_wait_seconds``). A killed task kills
    its spark-submit (and, in cluster mode, the driver).

    :param batch_id: the batch to read (the plan task's ``output``, an int, or a template);
        default: the pipeline's planned batch.
    :param spark_conn_id: the Spark connection (the master: ``local[2]``, ``spark://...``, ``yarn``, ...).
    :param spark_conf: extra ``--conf`` settings (templated).
    :param spark_jars: local paths of the Kafka connector jars (default: ``[kafka_offsets] spark_jars``).
    :param spark_packages: Maven coordinates instead (default: ``[kafka_offsets] spark_packages``,
        else the connector matching the local pyspark).
    :param min_partitions: Spark tasks for the read (default: at least one per core).
    :param executor_cores: spark-submit ``--executor-cores``.
    :param executor_memory: spark-submit ``--executor-memory``.
    :param driver_memory: spark-submit ``--driver-memory``.
    :param num_executors: spark-submit ``--num-executors``.
    :param total_executor_cores: spark-submit ``--total-executor-cores``.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        "batch_id",
        "spark_conn_id",
        "spark_conf",
        "spark_jars",
        "spark_packages",
        "min_partitions",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"spark_conf": "json"}
    ui_color = "#fdf0e0"

    def __init__(
        self,
        *,
        batch_id: int | str | Mapping[str, Any] | XComArg | None = None,
        spark_conn_id: str = "spark_default",
        spark_conf: Mapping[str, str] | None = None,
        spark_jars: str | Sequence[str] | None = None,
        spark_packages: str | Sequence[str] | None = None,
        min_partitions: int | str | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        driver_memory: str | None = None,
        num_executors: int | None = None,
        total_executor_cores: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.batch_id = batch_id
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.min_partitions = min_partitions
        self.executor_cores = executor_cores
        self.executor_memory = executor_memory
        self.driver_memory = driver_memory
        self.num_executors = num_executors
        self.total_executor_cores = total_executor_cores
        self._submitter: BatchRunner | None = None

    def settings(self, context: Context | None = None, output_uri: str | None = None) -> SparkSettings:
        """Spark's settings; with a context, Spark's own OpenLineage events name this task as parent;
        with an ``s3://`` ``output_uri``, S3 credentials go to Spark privately."""
        return spark_settings(
            self.spark_conn_id,
            jars=self.spark_jars,
            packages=self.spark_packages,
            conf=openlineage_parent_conf(self.spark_conf, context) if context is not None else self.spark_conf,
            executor_cores=self.executor_cores,
            executor_memory=self.executor_memory,
            driver_memory=self.driver_memory,
            num_executors=self.num_executors,
            total_executor_cores=self.total_executor_cores,
            output_root=output_uri,
        )

    def run(self, context: Context) -> dict[str, Any] | None:
        validate_pipeline_name(self.pipeline)
        ledger = self.ledger()
        plan = load_batch(ledger, self.pipeline, parse_batch_id(self.batch_id))
        if plan is None:
            self.log.info("pipeline %s: no batch to read", self.pipeline)
            return None
        sink = self.sink_for(ledger)
        lineage = self.pipeline_lineage(ledger, sink)
        self._submitter = submitter = batch_runner(self.settings(context, plan.output_uri))
        if plan.readable_ranges:
            submitter.check()  # a missing Spark connection fails here, before the ledger records an attempt
        report = run_batch(
            ledger,
            sink,
            plan,
            submitter,
            KafkaClusterHook(self.kafka_conn_id).spark_properties() if plan.readable_ranges else {},
            actor_from_context(context),
            min_partitions=optional_int(self.min_partitions, "min_partitions", minimum=1),
            lease_s=float(config_value("attempt_lease_seconds", str(DEFAULT_LEASE_S))),
            wait_s=float(config_value("attempt_wait_seconds", str(DEFAULT_WAIT_S))),
        )
        records = report.records if report else 0
        if report is not None:
            self.handled(lineage, plan, records)
        return {"pipeline": plan.pipeline, "batch_id": plan.batch_id, "records_read": records}

    def on_kill(self) -> None:
        if self._submitter is not None:
            self._submitter.kill()


class KafkaBatchCommitOperator(KafkaBatchStepOperator):
    """Publish the batch's staged output and advance the cursor in one ledger transaction.

    Its outlet is the alias ``kafka_offsets/<pipeline>`` (:func:`pipeline_output_alias`); each
    commit this run makes emits one asset event on the output (the sink's location) through it,
    with the batch in ``extra``. A run that finds the batch already committed, or nothing to
    commit, emits none.

    :param batch_id: the batch to commit (the plan task's ``output``, an int, or a template);
        default: the pipeline's planned batch.
    """

    template_fields: Sequence[str] = (*KafkaOffsetsBaseOperator.template_fields, "batch_id")
    ui_color = "#e0ecfd"

    def __init__(self, *, batch_id: int | str | Mapping[str, Any] | XComArg | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch_id = batch_id
        if "{{" not in self.pipeline:  # a templated pipeline's alias is added once rendered
            self.add_outlets([pipeline_output_alias(self.pipeline)])

    def run(self, context: Context) -> dict[str, Any] | None:
        validate_pipeline_name(self.pipeline)
        alias = pipeline_output_alias(self.pipeline)
        if alias not in self.outlets:
            self.add_outlets([alias])
        ledger = self.ledger()
        batch_id = parse_batch_id(self.batch_id)
        if batch_id is None:
            with ledger.transaction() as tx:
                batch_id = tx.planned_batch_id(self.pipeline)
            if batch_id is None:
                self.log.info("pipeline %s: no batch to commit", self.pipeline)
                return None
        sink = self.sink_for(ledger)
        lineage = self.pipeline_lineage(ledger, sink)
        outcome = commit_batch(ledger, sink, self.pipeline, batch_id, actor_from_context(context))
        if outcome.committed_now:
            committed = self.handled(lineage, outcome.plan, outcome.records)
            context["outlet_events"][alias].add(output_asset(committed.location), extra=committed.batch_facts())
            self.mirror_consumer_group(ledger)
        return {
            "pipeline": self.pipeline,
            "batch_id": batch_id,
            "records": outcome.records,
            "committed_now": outcome.committed_now,
            "output_uri": outcome.plan.output_uri,
        }

    def mirror_consumer_group(self, ledger: Ledger) -> None:
        """Best effort: the ledger is the truth, the consumer group only feeds lag monitors."""
        from airflow_kafka_offsets.service.operations import mirror_to_consumer_group

        try:
            group = mirror_to_consumer_group(ledger, KafkaClusterHook(self.kafka_conn_id).get_conn(), self.pipeline)
        except Exception as exc:
            self.log.warning("pipeline %s: could not mirror offsets into its consumer group: %s", self.pipeline, exc)
        else:
            if group:
                self.log.info("pipeline %s: offsets mirrored into consumer group %s", self.pipeline, group)


def kafka_ingest_task_group(
    group_id: str,
    *,
    pipeline: str,
    topics: Sequence[str] | str,
    output_root: str,
    sink: str | Mapping[str, Any] | None = None,
    kafka_conn_id: str = "kafka_default",
    postgres_conn_id: str = "postgres_default",
    spark_conn_id: str = "spark_default",
    ledger_schema: str | None = None,
    kafka_asset_server: str | None = None,
    plan_kwargs: PlanOptions | None = None,
    spark_kwargs: SparkOptions | None = None,
    commit_kwargs: Mapping[str, Any] | None = None,
) -> TaskGroup:
    """plan >> read >> commit for one pipeline, the batch id passed by XCom.

    Literal ``topics`` are the plan task's inlets in Airflow's asset graph as soon as the DAG is
    parsed (``kafka://<server>/<topic>``, the server from the Kafka connection, or
    ``kafka_asset_server``); templated ones become the read and commit tasks' inlets when they run.
    ``plan_kwargs`` and ``spark_kwargs`` take the documented keys of :class:`PlanOptions` and
    :class:`SparkOptions`; ``commit_kwargs`` any BaseOperator argument of the commit task.
    """
    common: dict[str, Any] = {
        "pipeline": pipeline,
        "kafka_conn_id": kafka_conn_id,
        "postgres_conn_id": postgres_conn_id,
        "ledger_schema": ledger_schema,
        "kafka_asset_server": kafka_asset_server,
    }
    with TaskGroup(group_id=group_id) as group:
        spark = spark_kwargs or {}
        plan = KafkaBatchPlanOperator(
            task_id="plan",
            topics=topics,
            output_root=output_root,
            sink=sink,
            spark_conn_id=spark_conn_id,
            spark_jars=spark.get("spark_jars"),
            spark_packages=spark.get("spark_packages"),
            **common,
            **(plan_kwargs or {}),
        )
        batch_id = plan.output  # the plan's result: read and commit take its batch_id
        read = KafkaBatchSparkOperator(
            task_id="read", batch_id=batch_id, spark_conn_id=spark_conn_id, **common, **spark
        )
        commit = KafkaBatchCommitOperator(task_id="commit", batch_id=batch_id, **common, **(commit_kwargs or {}))
        plan >> read >> commit
    return group
