"""The read step: the batch's ranges read by Spark into a staging location, Spark's report checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from airflow.sdk import Context, XComArg

from airflow_kafka_offsets.config import config_value
from airflow_kafka_offsets.core.options import given_options, templated_names
from airflow_kafka_offsets.core.spec import validate_pipeline_name
from airflow_kafka_offsets.core.values import optional_int
from airflow_kafka_offsets.lineage import openlineage_parent_conf
from airflow_kafka_offsets.operators.assets import KafkaBatchStepOperator
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator, SparkJobOperator, parse_batch_id
from airflow_kafka_offsets.operators.options import takes_options
from airflow_kafka_offsets.runtime import actor_from_context
from airflow_kafka_offsets.service.context import Submit
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S, DEFAULT_WAIT_S
from airflow_kafka_offsets.service.plan import load_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.spark.options import SPARK_TEMPLATE_FIELDS, ReadOptions


class SparkBatchStepOperator(KafkaBatchStepOperator, SparkJobOperator):
    """A step that reads batches with Spark: the read operator, and the one-task operator."""

    template_fields_renderers: ClassVar[dict[str, str]] = SparkJobOperator.template_fields_renderers


class KafkaBatchSparkOperator(SparkBatchStepOperator):
    """Read the batch's ranges with Spark into a staging location and check Spark's report.

    Nothing runs when there is no batch, the batch is already committed, or it reads no
    records; no second Spark job runs when another run's attempt has read the batch or is
    reading it (this one waits, ``[kafka_offsets] attempt_wait_seconds``). A killed task kills
    its spark-submit (and, in cluster mode, the driver).

    :param batch_id: the batch to read (the plan task's ``output``, an int, or a template);
        default: the pipeline's planned batch.

    It also takes ``min_partitions`` (:class:`~airflow_kafka_offsets.spark.options.ReadOptions`) and
    the Spark options of :class:`~airflow_kafka_offsets.spark.options.SparkJobOptions` (``spark_conn_id``,
    ``spark_conf``, ``spark_jars``, ``spark_packages``, spark-submit's resources).
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        "batch_id",
        *SPARK_TEMPLATE_FIELDS,
        *templated_names(ReadOptions),
    )
    ui_color = "#fdf0e0"

    @takes_options(ReadOptions)
    def __init__(self, *, batch_id: int | str | Mapping[str, Any] | XComArg | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch_id = batch_id

    def run(self, context: Context) -> dict[str, Any] | None:
        return read_step(self, context, parse_batch_id(self.batch_id))


def read_step(op: SparkBatchStepOperator, context: Context, batch_id: int | None) -> dict[str, Any] | None:
    """Read ``batch_id`` (None: the planned batch) of ``op``'s pipeline with Spark, with its rendered
    Spark and read options; None when there is nothing to read."""
    validate_pipeline_name(op.pipeline)
    ledger = op.ledger()
    plan = load_batch(ledger, op.pipeline, batch_id)
    if plan is None:
        op.log.info("pipeline %s: no batch to read", op.pipeline)
        return None
    sink = op.sink_for(ledger)
    lineage = op.pipeline_lineage(ledger, sink)
    # Spark's own OpenLineage events name this task as their parent
    options = op.spark_options()
    options = replace(options, conf=openlineage_parent_conf(options.conf, context) or {})
    submitter: Submit = no_spark_job  # a batch that reads no records runs none: its connection is not read
    if plan.readable_ranges:
        # S3 credentials go to Spark privately; the Spark connection is read here, and a missing one fails
        # before the ledger records an attempt
        runner = op.spark_runner(plan.output_uri, options)
        runner.check()
        submitter = runner
    read = ReadOptions(**given_options(ReadOptions, op))
    report = run_batch(
        ledger,
        sink,
        plan,
        submitter,
        op.runtime().kafka_hook().spark_properties() if plan.readable_ranges else {},
        actor_from_context(context),
        min_partitions=optional_int(read.min_partitions, "min_partitions", minimum=1),
        lease_s=float(config_value("attempt_lease_seconds", str(DEFAULT_LEASE_S))),
        wait_s=float(config_value("attempt_wait_seconds", str(DEFAULT_WAIT_S))),
        offsets_source=op.runtime().kafka().offsets,  # records already deleted: refused before Spark
    )
    records = report.records if report else 0
    if report is not None:
        op.handled(lineage, plan, records)
    return {"pipeline": plan.pipeline, "batch_id": plan.batch_id, "records_read": records}


def no_spark_job(job: Mapping[str, Any]) -> None:
    """The Spark job of a batch that reads no records: :func:`run_batch` skips Spark for it."""
    raise AssertionError(f"batch {job['batch_id']} reads no records: it has no Spark job to run")
