"""Airflow operators: plan, read (Spark) and commit a Kafka batch, and a TaskGroup of the three."""

from airflow_kafka_offsets.operators.ingest import (
    KafkaBatchCommitOperator,
    KafkaBatchPlanOperator,
    KafkaBatchSparkOperator,
    kafka_ingest_task_group,
)
from airflow_kafka_offsets.operators.manual import KafkaPipelineOperationOperator

__all__ = [
    "KafkaBatchCommitOperator",
    "KafkaBatchPlanOperator",
    "KafkaBatchSparkOperator",
    "KafkaPipelineOperationOperator",
    "kafka_ingest_task_group",
]
