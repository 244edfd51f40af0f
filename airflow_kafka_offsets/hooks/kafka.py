"""The Kafka connection (the apache-kafka provider's ``kafka`` type, whose extra holds a
confluent-kafka config), for planning (AdminClient) and for Spark (Java client settings).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.clients.kafka_config import java_client_properties
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.connections import get_connection


class KafkaClusterHook(BaseHook):
    """Reads the Kafka connection; same format as the apache-kafka provider (extra = client config)."""

    conn_name_attr = "kafka_config_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Apache Kafka"

    def __init__(self, kafka_config_id: str = default_conn_name, timeout_s: float = 30.0) -> None:
        super().__init__()
        self.kafka_config_id = kafka_config_id
        self.timeout_s = timeout_s

    def client_config(self) -> dict[str, Any]:
        config = dict(get_connection(self.kafka_config_id, "Kafka").extra_dejson)
        if not config.get("bootstrap.servers"):
            raise ConfigurationError(
                f"Kafka connection {self.kafka_config_id!r} has no 'bootstrap.servers' in its extra"
            )
        return config

    def get_conn(self) -> KafkaOffsetsClient:
        return KafkaOffsetsClient(self.client_config(), timeout_s=self.timeout_s)

    def spark_properties(self) -> dict[str, str]:
        """Java client properties for Spark's Kafka source (secrets included: keep them off argv)."""
        return java_client_properties(self.client_config())
