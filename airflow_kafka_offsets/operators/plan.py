"""The plan step: the next batch's exact offset ranges, written to the ledger before anything runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_kafka_offsets.core.options import given_options, templated_names
from airflow_kafka_offsets.core.plan_options import PlanOptions
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BackfillRefusedError
from airflow_kafka_offsets.hooks.schema_registry import registry_clients
from airflow_kafka_offsets.operators.assets import KafkaTopicAssetsOperator
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator, SparkConnectorOperator
from airflow_kafka_offsets.operators.options import takes_options
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, actor_from_context, spark_runner
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


# The plan step's arguments beside its options: what the pipeline reads and where it writes.
SPEC_ARGUMENTS = ("topics", "output_root", "sink")


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
    :param spark_conn_id: when set, the Spark connection the batch will run on is checked before anything
        is planned (its Spark's version against the connector in ``spark_jars`` / ``spark_packages``, a
        Spark Connect server's version against this worker's client); the task group sets it, with the
        read step's connector.

    It also takes every pipeline option of :class:`~airflow_kafka_offsets.core.plan_options.PlanOptions`
    (``starting_offsets``, the caps, the decode step, ...) as a keyword argument, templated but for
    ``kafka_timeout_s``.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        *CONNECTOR_PARAMS,
        *SPEC_ARGUMENTS,
        *templated_names(PlanOptions),
    )
    ui_color = "#e8f4ea"

    @takes_options(PlanOptions)
    def __init__(
        self,
        *,
        topics: Sequence[str] | str,
        output_root: str,
        sink: str | Mapping[str, Any] | None = None,
        spark_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(spark_conn_id=spark_conn_id, **kwargs)
        self.topics = topics
        self.output_root = output_root
        self.sink = sink
        self.declare_topic_inlets(topics)

    def run(self, context: Context) -> dict[str, Any]:
        return plan_next(self, context, self.topics, self.output_root, self.sink)


def plan_next(
    op: SparkConnectorOperator,
    context: Context,
    topics: Sequence[str] | str,
    output_root: str,
    sink: str | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Plan the next batch of ``op``'s pipeline (or take the planned one) with its rendered pipeline
    options (:class:`PlanOptions`); checks its Spark connection first."""
    refuse_backfill(context, op.pipeline)
    options = PlanOptions(**given_options(PlanOptions, op))
    spec = build_spec(op.pipeline, topics, output_root, sink=sink, **options.spec_kwargs())
    if op.spark_connection_given():
        spark_runner(op.spark_options().connector()).check()
    ledger = op.ledger()
    output = AIRFLOW_SINKS.for_spec(ledger, spec)
    decode = next_decode(ledger, spec, output, registry_clients(f"for pipeline {spec.name}"))
    kafka = op.runtime().kafka(timeout_s=options.kafka_timeout_s)
    outcome = plan_batch(ledger, spec, kafka.offsets, output, actor_from_context(context), decode)
    plan = outcome.plan
    return {
        "pipeline": spec.name,
        "batch_id": plan.batch_id if plan else None,
        "records_planned": plan.records_planned if plan else 0,
        "replayed": outcome.replayed,
    }
