"""The apache-kafka provider's ``kafka`` connection (extra: a confluent-kafka config), for planning
(offset bounds, never records) and for Spark (the same settings as Java client properties).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.clients.kafka_config import java_client_properties
from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.connections import get_connection


class KafkaClusterHook(KafkaBaseHook):
    """The provider's Kafka hook (its connection form and test, its config builder: allowlisted
    callbacks, managed-Kafka OAuth) handing out an offsets-only client and Spark's settings."""

    def __init__(self, kafka_config_id: str = DEFAULT_KAFKA_CONN_ID, timeout_s: float = 30.0) -> None:
        super().__init__(kafka_config_id)  # type: ignore[no-untyped-call]
        self.timeout_s = timeout_s

    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        """The connection, with errors that name it (the provider's builder reads it through here)."""
        return get_connection(conn_id, "Kafka")

    def client_config(self) -> dict[str, Any]:
        """The confluent-kafka config exactly as the provider's own hooks build it."""
        try:
            config: dict[str, Any] = self._build_config()
        except ValueError as exc:  # no bootstrap.servers, or a callback outside [apache_kafka] callback_allowlist
            raise ConfigurationError(
                f"Kafka connection {self.kafka_config_id!r} cannot be used: {exc} Fix its Config Dict (extra)."
            ) from exc
        return config

    def bootstrap_servers(self) -> str:
        """The connection's ``bootstrap.servers``, read without building the client config (no
        callbacks, no OAuth token): what names the cluster in asset URIs, also when a DAG is parsed."""
        servers = self.get_connection(self.kafka_config_id).extra_dejson.get("bootstrap.servers")
        if not isinstance(servers, str) or not servers.strip():
            raise ConfigurationError(
                f"Kafka connection {self.kafka_config_id!r} names no bootstrap.servers: add them to its Config Dict "
                "(extra)."
            )
        return servers

    def get_conn(self) -> KafkaOffsetsClient:
        return KafkaOffsetsClient(self.client_config(), timeout_s=self.timeout_s)

    def spark_properties(self) -> dict[str, str]:
        """Java client properties for Spark's Kafka source (secrets included: keep them off argv)."""
        return java_client_properties(self.client_config())
