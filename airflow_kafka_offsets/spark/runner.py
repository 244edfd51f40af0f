"""The read step's execution mode, chosen by the Spark connection's type (the connection as read from
Airflow once: :class:`~airflow_kafka_offsets.spark.connection.SparkConnection`).

``spark`` (the default, as before): spark-submit through the Spark provider's hook.
``spark_connect``: the same app on a long-lived Spark Connect server (no JVM start per batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from airflow_kafka_offsets.spark.connect import SparkConnectRunner
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter


class BatchRunner(Protocol):
    """Runs one job of the app; ``check`` refuses a configuration before any ledger write."""

    settings: SparkSettings

    def check(self) -> object: ...

    def kill(self) -> None: ...

    def __call__(self, job: Mapping[str, Any]) -> None: ...


def batch_runner(settings: SparkSettings, connection: SparkConnection) -> BatchRunner:
    """Spark Connect for a ``spark_connect`` connection, spark-submit otherwise."""
    if connection.is_connect:
        return SparkConnectRunner(settings, connection)
    return SparkBatchSubmitter(settings, connection)
