"""Where batch output goes and how a staged attempt is published."""

from airflow_kafka_offsets.sinks.local import LocalDirectorySink
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME

__all__ = ["LocalDirectorySink", "REPORT_NAME"]
