"""A schema registry (the Confluent Schema Registry REST API) from an Airflow connection of the
provider's type ``kafka_offsets_schema_registry``: confluent-kafka's ``SchemaRegistryClient`` and its
config. Its form and the rules it is read by: :mod:`airflow_kafka_offsets.clients.schema_registry`.

The client needs confluent-kafka's schema registry extras: ``pip install 'airflow-kafka-offsets[schema-registry]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

from airflow_kafka_offsets.clients.schema_registry import (
    CONN_TYPE,
    HOOK_NAME,
    RegistryAccess,
    check_conn_type,
    registry_access,
)
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.connections import get_connection, mask_secrets

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

EXTRA_HINT = "pip install 'airflow-kafka-offsets[schema-registry]'"


# Seconds a registry request may take: the client's default is no limit, so a registry that never
# answers would hold a plan task forever.
REQUEST_TIMEOUT_S = 30


class SchemaRegistryHook(BaseHook):
    """Where the registry is and who to be, from the connection ``schema_registry_conn_id``. Its password
    or token stays in the returned :class:`RegistryAccess` and client config (masked in task logs),
    never in a message or a repr."""

    conn_name_attr = "schema_registry_conn_id"
    default_conn_name = "schema_registry_default"
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(self, schema_registry_conn_id: str = default_conn_name, purpose: str = "") -> None:
        """``purpose`` (e.g. ``"for topic orders"``) goes into the errors that name the connection."""
        super().__init__()
        self.schema_registry_conn_id = schema_registry_conn_id
        self.purpose = purpose

    def __repr__(self) -> str:
        return f"SchemaRegistryHook(schema_registry_conn_id={self.schema_registry_conn_id!r})"

    def access(self) -> RegistryAccess:
        conn_id = self.schema_registry_conn_id
        conn = get_connection(conn_id, f"Schema registry ({self.purpose})" if self.purpose else "Schema registry")
        check_conn_type(conn_id, conn.conn_type)
        access = registry_access(
            conn_id, conn.host, conn.login, conn.password, conn.extra_dejson, port=conn.port, schema=conn.schema
        )
        mask_secrets(access.secrets())
        return access

    def client_config(self) -> dict[str, str]:
        """confluent-kafka's ``SchemaRegistryClient`` config (the secrets included: never log it)."""
        return self.access().client_config()

    def get_conn(self) -> SchemaRegistryClient:
        """A ``SchemaRegistryClient`` for the registry (confluent-kafka's own: its caches, retries, errors)."""
        config = self.client_config()
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient
        except ImportError as exc:
            raise ConfigurationError(
                f"the schema registry client needs confluent-kafka's schema registry extras ({exc}): {EXTRA_HINT}"
            ) from exc
        try:
            return SchemaRegistryClient({**config, "timeout": REQUEST_TIMEOUT_S})
        except (ValueError, TypeError, OSError) as exc:  # its checks of the config (they never quote the
            # secrets), or a CA file (ssl_ca_location) it cannot read
            raise ConfigurationError(
                f"Schema registry connection {self.schema_registry_conn_id!r} cannot be used: {exc}"
            ) from exc

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: list the registry's subjects with the connection's credentials."""
        try:
            subjects = self.get_conn().get_subjects()
        except Exception as exc:  # the registry's answer (401, 404 ...) or why nothing answered
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"the registry answers; {len(subjects)} subject(s)"


def registry_clients(purpose: str = "") -> Callable[[str], SchemaRegistryClient]:
    """``SchemaRegistryClient`` by connection id: what planning an Avro pipeline's batches asks for."""
    return lambda conn_id: SchemaRegistryHook(conn_id, purpose=purpose).get_conn()
