"""Hooks own the Airflow connections: Kafka (the apache-kafka provider's ``kafka`` type,
whose extra holds a confluent-kafka config) and PostgreSQL for the ledger.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.kafka_config import java_client_properties
from airflow_kafka_offsets.ledger import Ledger


def _connection(conn_id: str, what: str) -> Any:
    """The Airflow connection, or a ConfigurationError naming it (missing, or its lookup failed)."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException as exc:
        raise ConfigurationError(f"{what} connection {conn_id!r} is not defined in Airflow") from exc
    except Exception as exc:  # a broken secrets backend or metadata database (its text may quote the secret)
        raise ConfigurationError(
            f"{what} connection {conn_id!r} could not be read from Airflow ({type(exc).__name__}; see the cause)"
        ) from exc


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
        config = dict(_connection(self.kafka_config_id, "Kafka").extra_dejson)
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


class LedgerHook(BaseHook):
    """The ledger on the PostgreSQL connection, in ``schema``; migrates it on first use."""

    conn_name_attr = "postgres_conn_id"
    default_conn_name = "postgres_default"
    hook_name = "Kafka Offsets ledger"

    def __init__(self, postgres_conn_id: str = default_conn_name, schema: str = "kafka_offsets") -> None:
        super().__init__()
        self.postgres_conn_id = postgres_conn_id
        self.schema = schema

    def get_conn(self) -> Ledger:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        _connection(self.postgres_conn_id, "PostgreSQL")
        hook = PostgresHook(postgres_conn_id=self.postgres_conn_id)
        ledger = Ledger(hook.get_conn, schema=self.schema)
        ledger.check_version()
        return ledger
