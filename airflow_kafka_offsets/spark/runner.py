"""The read step's execution mode, chosen by the Spark connection's type.

``spark`` (the default, as before): spark-submit through the Spark provider's hook.
``spark_connect``: the same app on a long-lived Spark Connect server (no JVM start per batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from airflow_kafka_offsets.spark.connect import CONNECT_CONN_TYPE, SparkConnectRunner
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter


class BatchRunner(Protocol):
    """Runs one job of the app; ``check`` refuses a configuration before any ledger write."""

    settings: SparkSettings

    def check(self) -> object: ...

    def kill(self) -> None: ...

    def __call__(self, job: Mapping[str, Any]) -> None: ...


def connection_type(conn_id: str) -> str | None:
    """The connection's type; None when it cannot be read (spark-submit's check then says why)."""
    from airflow.sdk import BaseHook

    try:
        return str(BaseHook.get_connection(conn_id).conn_type)
    except Exception:  # reported by SparkBatchSubmitter.check with the connection's name
        return None


def batch_runner(settings: SparkSettings) -> BatchRunner:
    """Spark Connect for a ``spark_connect`` connection, spark-submit otherwise."""
    if connection_type(settings.conn_id) == CONNECT_CONN_TYPE:
        return SparkConnectRunner(settings)
    return SparkBatchSubmitter(settings)
