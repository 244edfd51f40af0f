"""Airflow operators: plan, read (Spark) and commit a Kafka batch, as a TaskGroup of three or in one task."""

from airflow_kafka_offsets.operators.approval import KafkaOperationApprovalOperator, KafkaOperationPreviewOperator
from airflow_kafka_offsets.operators.batch import KafkaBatchOperator
from airflow_kafka_offsets.operators.commit import KafkaBatchCommitOperator
from airflow_kafka_offsets.operators.manual import KafkaPipelineOperationOperator
from airflow_kafka_offsets.operators.plan import KafkaBatchPlanOperator
from airflow_kafka_offsets.operators.read import KafkaBatchSparkOperator
from airflow_kafka_offsets.operators.task_group import kafka_ingest_task_group

__all__ = [
    "KafkaBatchCommitOperator",
    "KafkaBatchOperator",
    "KafkaBatchPlanOperator",
    "KafkaBatchSparkOperator",
    "KafkaOperationApprovalOperator",
    "KafkaOperationPreviewOperator",
    "KafkaPipelineOperationOperator",
    "kafka_ingest_task_group",
]
