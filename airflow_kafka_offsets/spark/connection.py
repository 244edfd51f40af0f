"""The Spark connection a batch's read runs with, as read from Airflow once (``hooks/spark.py``):
plain values, so that nothing under ``spark/`` reads a connection itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_offsets.errors import ConfigurationError

# The Spark provider's type of a Spark Connect server's connection (its SparkConnectHook).
CONNECT_CONN_TYPE = "spark_connect"


@dataclass(frozen=True)
class SparkConnection:
    """A Spark connection that has a host: ``spark`` (spark-submit's master) or ``spark_connect``.

    ``extra`` is for non-secret settings (deploy-mode, spark-binary, spark-version); it may hold a
    keytab, so it stays out of the repr, like ``url``: a ``spark_connect`` connection's ``sc://`` URL
    as the Spark provider builds it, which holds the token (None for another type). Never log either.
    """

    conn_id: str
    conn_type: str
    host: str
    port: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    url: str | None = field(default=None, repr=False)

    @property
    def is_connect(self) -> bool:
        """A Spark Connect server's connection (the read runs there instead of with spark-submit)."""
        return self.conn_type == CONNECT_CONN_TYPE

    def connect_url(self) -> str:
        """The ``sc://`` URL of the Spark Connect server (holds the token: never log it); refused for a
        connection of another type."""
        if self.url is None:
            raise ConfigurationError(
                f"Spark connection {self.conn_id!r} is of type {self.conn_type!r}, not {CONNECT_CONN_TYPE!r}: "
                "it names no Spark Connect server"
            )
        return self.url
