"""One operator for the manual operations (status, replay, reset, catch-up, abort), driven by the
trigger form of ``dags/kafka_offsets_manual_ops.py`` or by any DAG that passes the same options.

The options are validated by the same field definitions as the form and the CLI
(:mod:`airflow_kafka_offsets.core.operation_fields`) and run by the shared dispatcher
(:mod:`airflow_kafka_offsets.service.commands`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_kafka_offsets.config import spark_settings
from airflow_kafka_offsets.core.operation_fields import operation, parse_request
from airflow_kafka_offsets.hooks import KafkaClusterHook
from airflow_kafka_offsets.hooks.schema_registry import registry_clients
from airflow_kafka_offsets.operators.ingest import KafkaOffsetsBaseOperator, actor_from_context
from airflow_kafka_offsets.service.commands import OperationContext, run_operation
from airflow_kafka_offsets.spark.runner import batch_runner


class KafkaPipelineOperationOperator(KafkaOffsetsBaseOperator):
    """Run one manual operation on a pipeline; ``options`` carries the trigger form's fields.

    Replay and catch-up submit Spark jobs with this operator's own Spark settings.

    :param operation: one of the operations in :mod:`airflow_kafka_offsets.core.operation_fields` (templated).
    :param options: the trigger form's fields (or the same keys from any DAG; templated).
    :param spark_conn_id: the Spark connection for replay and catch-up.
    :param spark_conf: extra ``--conf`` settings for replay and catch-up.
    :param spark_jars: the Kafka connector jars (default: ``[kafka_offsets] spark_jars``).
    :param spark_packages: Maven coordinates instead (default: ``[kafka_offsets] spark_packages``).
    :param executor_cores: spark-submit ``--executor-cores``.
    :param executor_memory: spark-submit ``--executor-memory``.
    :param driver_memory: spark-submit ``--driver-memory``.
    :param num_executors: spark-submit ``--num-executors``.
    :param total_executor_cores: spark-submit ``--total-executor-cores``.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        "operation",
        "options",
        "spark_conn_id",
        "spark_conf",
        "spark_jars",
        "spark_packages",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"options": "json", "spark_conf": "json"}
    ui_color = "#f3e8fd"

    def __init__(
        self,
        *,
        operation: str,
        options: Mapping[str, Any] | None = None,
        spark_conn_id: str = "spark_default",
        spark_conf: Mapping[str, str] | None = None,
        spark_jars: str | Sequence[str] | None = None,
        spark_packages: str | Sequence[str] | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        driver_memory: str | None = None,
        num_executors: int | None = None,
        total_executor_cores: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.operation = operation
        self.options = options
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.executor_cores = executor_cores
        self.executor_memory = executor_memory
        self.driver_memory = driver_memory
        self.num_executors = num_executors
        self.total_executor_cores = total_executor_cores

    def run(self, context: Context) -> dict[str, Any]:
        request = parse_request({**(self.options or {}), "operation": self.operation, "pipeline": self.pipeline})
        kafka_hook = KafkaClusterHook(self.kafka_conn_id)
        submit, properties = None, {}
        ledger = self.ledger()
        if operation(request.operation).uses_spark:
            with ledger.transaction() as tx:
                output_root = tx.output_root(request.pipeline)
            submit = batch_runner(
                spark_settings(
                    self.spark_conn_id,
                    jars=self.spark_jars,
                    packages=self.spark_packages,
                    conf=self.spark_conf,
                    executor_cores=self.executor_cores,
                    executor_memory=self.executor_memory,
                    driver_memory=self.driver_memory,
                    num_executors=self.num_executors,
                    total_executor_cores=self.total_executor_cores,
                    output_root=output_root,
                )
            )
            properties = kafka_hook.spark_properties()
        actor = {**actor_from_context(context), "operation": request.operation}
        registry = registry_clients(f"for pipeline {request.pipeline}")
        ctx = OperationContext(ledger, kafka_hook.get_conn(), actor, submit, properties, registry)
        result = run_operation(request, ctx)
        self.log.info("%s of %s:\n%s", request.operation, request.pipeline, result.text)
        return result.data
