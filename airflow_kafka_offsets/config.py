"""The ``[kafka_offsets]`` Airflow config section, and the settings built from it.

Operators, the manual operations and the CLI take their defaults from here, so one
setting means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kafka_offsets.object_storage.access import S3Access, is_object_store, s3a_spark_conf
from airflow_kafka_offsets.spark.settings import SparkSettings, split_list

CONFIG_SECTION = "kafka_offsets"
DEFAULT_LEDGER_SCHEMA = "kafka_offsets"


def config_value(key: str, fallback: str) -> str:
    """A setting of the section (an empty value means the fallback)."""
    from airflow.sdk import conf

    return conf.get(CONFIG_SECTION, key, fallback=fallback) or fallback


def ledger_schema(explicit: str | None = None) -> str:
    return explicit or config_value("ledger_schema", DEFAULT_LEDGER_SCHEMA)


def object_storage(location: str) -> S3Access | None:
    """How to reach ``location``: None for local paths; for ``s3://`` the S3 connection named by
    ``[kafka_offsets] object_storage_conn_id`` (default ``aws_default``)."""
    if not is_object_store(location):
        return None
    from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook

    conn_id = config_value("object_storage_conn_id", ObjectStorageHook.default_conn_name)
    return ObjectStorageHook(conn_id, purpose=f"for {location}").get_conn()


def iceberg_catalog_uri(conn_id: str) -> str:
    """The database of an Iceberg SQL catalog outside the ledger's, from its Airflow postgres connection."""
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    from airflow_kafka_offsets.hooks.connections import get_connection
    from airflow_kafka_offsets.hooks.ledger import catalog_uri

    get_connection(conn_id, "Iceberg catalog (PostgreSQL)")
    return catalog_uri(PostgresHook(postgres_conn_id=conn_id).get_uri())


def schema_registry_access(conn_id: str) -> dict[str, Any]:
    """How Spark reaches the schema registry of connection ``conn_id`` (Avro batches; holds secrets)."""
    from airflow_kafka_offsets.clients.avro_registry import spark_registry_config
    from airflow_kafka_offsets.hooks.schema_registry import SchemaRegistryHook

    return spark_registry_config(SchemaRegistryHook(conn_id, purpose="for Avro decoding").access())


def spark_settings(
    conn_id: str,
    *,
    jars: str | Sequence[str] | None = None,
    packages: str | Sequence[str] | None = None,
    conf: Mapping[str, str] | None = None,
    private_conf: Mapping[str, str] | None = None,
    executor_cores: int | None = None,
    executor_memory: str | None = None,
    driver_memory: str | None = None,
    num_executors: int | None = None,
    total_executor_cores: int | None = None,
    output_root: str | None = None,
) -> SparkSettings:
    """Spark settings with the connector jars or packages of the config section as defaults; S3A
    settings for an ``s3://`` ``output_root`` go in the private conf (the job file, never argv)."""
    storage = object_storage(output_root) if output_root else None
    if storage is not None:
        private_conf = {**s3a_spark_conf(storage), **(private_conf or {})}
    return SparkSettings(
        conn_id=conn_id,
        jars=split_list(jars) or split_list(config_value("spark_jars", "")),
        packages=split_list(packages) or split_list(config_value("spark_packages", "")),
        conf=dict(conf or {}),
        private_conf=dict(private_conf or {}),
        storage=storage,
        registry_access=schema_registry_access,
        executor_cores=executor_cores,
        executor_memory=executor_memory,
        driver_memory=driver_memory,
        num_executors=num_executors,
        total_executor_cores=total_executor_cores,
        class_archive_dir=config_value("spark_class_archive_dir", "") or None,
        spark_version=config_value("spark_version", "") or None,
    )
