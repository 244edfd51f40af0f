"""The ``[kafka_offsets]`` Airflow config section, and the defaults of the connection ids.

Operators, the manual operations, the CLI, the trigger and the pipelines page take their defaults
from here, so one setting means the same everywhere. Nothing here opens a connection (that is
:mod:`airflow_kafka_offsets.runtime`), and Airflow's config is read only when a value is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_kafka_offsets.object_storage.access import S3Access

from airflow_kafka_offsets.core.defaults import (
    DEFAULT_KAFKA_CONN_ID,
    DEFAULT_LEDGER_SCHEMA,
    DEFAULT_OBJECT_STORAGE_CONN_ID,
    DEFAULT_POSTGRES_CONN_ID,
    DEFAULT_SPARK_CONN_ID,
)

__all__ = [
    "CONFIG_SECTION",
    "DEFAULT_KAFKA_CONN_ID",
    "DEFAULT_LEDGER_SCHEMA",
    "DEFAULT_OBJECT_STORAGE_CONN_ID",
    "DEFAULT_POSTGRES_CONN_ID",
    "DEFAULT_SPARK_CONN_ID",
    "config_value",
    "ledger_schema",
    "object_storage",
]

CONFIG_SECTION = "kafka_offsets"


def config_value(key: str, fallback: str) -> str:
    """A setting of the section (an empty value means the fallback)."""
    try:
        from airflow.sdk import conf
    except ImportError:  # Airflow 3.1's task SDK has no conf: the core's
        from airflow.configuration import conf  # type: ignore[assignment,unused-ignore]

    return conf.get(CONFIG_SECTION, key, fallback=fallback) or fallback


def ledger_schema(explicit: str | None = None) -> str:
    return explicit or config_value("ledger_schema", DEFAULT_LEDGER_SCHEMA)


def object_storage(location: str) -> S3Access | None:
    """How to reach ``location`` (kept importable from here for readers; it is
    :func:`airflow_kafka_offsets.runtime.object_storage`, which opens the S3 connection)."""
    from airflow_kafka_offsets.runtime import object_storage as from_connection

    return from_connection(location)
