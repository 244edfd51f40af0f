"""The plan step: the next batch's exact offset ranges, written to the ledger before anything runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from airflow.sdk import Context

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BackfillRefusedError
from airflow_kafka_offsets.hooks.schema_registry import registry_clients
from airflow_kafka_offsets.operators.assets import KafkaTopicAssetsOperator
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator, SparkConnectorOperator
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, KAFKA_TIMEOUT_S, actor_from_context, spark_runner
from airflow_kafka_offsets.service.decoding import next_decode
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.spark.options import CONNECTOR_PARAMS


def refuse_backfill(context: Mapping[str, Any], pipeline: str) -> None:
    """A backfill run would ingest what the cursor points at, not its data interval: refuse it."""
    run_type = getattr(context.get("dag_run"), "run_type", None)
    if getattr(run_type, "value", run_type) == "backfill":
        raise BackfillRefusedError(
            f"pipeline {pipeline!r}: a backfill run would ingest whatever follows the pipeline's cursor, not "
            "its data interval, so ingest DAGs refuse backfills (allowed_run_types); to re-read past records use "
            "the replay operation (by batch, offsets or time window), to move the cursor use reset"
        )


class PlanOptions(TypedDict, total=False):
    """Pipeline options for :class:`KafkaBatchPlanOperator` (``plan_kwargs`` of the task group).

    starting_offsets: where a new pipeline starts: ``earliest`` | ``latest`` | ``error``.
    new_partition_offsets: where partitions added later start (same choices).
    on_data_loss: ``fail`` | ``skip`` when retention deleted records the pipeline has not read.
    max_records_per_batch / max_records_per_partition: caps on offset spans per batch.
    consumer_group: mirror the cursor into this Kafka consumer group after each commit (for lag monitors).
    json_schema / max_decode_errors: optional JSON decode step (a Spark DDL schema) and its error budget.
    value_format: Avro values through a schema registry instead (``{"type": "avro", "subject": ...}``).
    keep_raw_value: false writes a decoded record's ``value`` as null (kept for records that do not decode).
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
    keep_raw_value: bool | str | None
    kafka_timeout_s: float


class KafkaBatchPlanOperator(KafkaTopicAssetsOperator, SparkConnectorOperator):
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
    :param keep_raw_value: with decoding, false writes ``value`` as null for the records that decoded (their
        content is in ``decoded``) and keeps it for those that did not: a smaller, faster write.
    :param kafka_timeout_s: how long to wait for Kafka's answers.
    :param spark_conn_id: when set, the Spark connection the batch will run on is checked before anything
        is planned (its Spark's version against the connector in ``spark_jars`` / ``spark_packages``, a
        Spark Connect server's version against this worker's client); the task group sets it, with the
        read step's connector.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        *CONNECTOR_PARAMS,
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
        "keep_raw_value",
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
        keep_raw_value: bool | str | None = None,
        kafka_timeout_s: float = KAFKA_TIMEOUT_S,
        spark_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(spark_conn_id=spark_conn_id, **kwargs)
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
        self.keep_raw_value = keep_raw_value
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
            keep_raw_value=self.keep_raw_value,
        )
        if self.spark_conn_id:
            spark_runner(self.spark_options().connector()).check()
        ledger = self.ledger()
        sink = AIRFLOW_SINKS.for_spec(ledger, spec)
        decode = next_decode(ledger, spec, sink, registry_clients(f"for pipeline {spec.name}"))
        kafka = self.runtime().kafka(timeout_s=self.kafka_timeout_s)
        outcome = plan_batch(ledger, spec, kafka.offsets, sink, actor_from_context(context), decode)
        plan = outcome.plan
        return {
            "pipeline": spec.name,
            "batch_id": plan.batch_id if plan else None,
            "records_planned": plan.records_planned if plan else 0,
            "replayed": outcome.replayed,
        }
