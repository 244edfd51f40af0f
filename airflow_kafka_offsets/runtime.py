"""The package's one seam to Airflow at run time: what the operators, the CLI, the trigger and the
pipelines page work with, opened from Airflow connections and the ``[kafka_offsets]`` config.

- the ledger (:meth:`AirflowRuntime.ledger`), Kafka (:meth:`AirflowRuntime.kafka`);
- the sinks (:data:`AIRFLOW_SINKS`: S3 from ``[kafka_offsets] object_storage_conn_id``, an external Iceberg
  catalog from its postgres connection);
- Spark (:func:`spark_settings`, :func:`spark_runner`: the connector's defaults and the class
  archive from the config, S3 settings in the private conf, the Spark connection read once);
- a manual operation's context (:meth:`AirflowRuntime.operation_context`) and who acts
  (:func:`actor_from_context`, :func:`cli_actor`).

Below it, ``service/`` and what it uses import nothing of Airflow: they get these as values.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.config import config_value, ledger_schema
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.catalogs import ExternalCatalog
from airflow_kafka_offsets.core.defaults import (
    DEFAULT_KAFKA_CONN_ID,
    DEFAULT_OBJECT_STORAGE_CONN_ID,
    DEFAULT_POSTGRES_CONN_ID,
    KAFKA_TIMEOUT_S,
)
from airflow_kafka_offsets.core.operation_fields import OperationRequest, operation
from airflow_kafka_offsets.hooks.kafka import KafkaClusterHook
from airflow_kafka_offsets.hooks.ledger import LedgerHook
from airflow_kafka_offsets.hooks.schema_registry import registry_clients
from airflow_kafka_offsets.hooks.spark import spark_connection
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import S3Access, is_object_store, s3a_spark_conf
from airflow_kafka_offsets.service.context import OperationContext, SinkOpener
from airflow_kafka_offsets.spark.options import SparkJobOptions
from airflow_kafka_offsets.spark.runner import BatchRunner, batch_runner
from airflow_kafka_offsets.spark.settings import SparkSettings, split_list


def object_storage(location: str) -> S3Access | None:
    """How to reach ``location``: None for local paths; for ``s3://`` the S3 connection named by
    ``[kafka_offsets] object_storage_conn_id`` (default ``aws_default``)."""
    if not is_object_store(location):
        return None
    from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook

    conn_id = config_value("object_storage_conn_id", DEFAULT_OBJECT_STORAGE_CONN_ID)
    return ObjectStorageHook(conn_id, purpose=f"for {location}").get_conn()


def iceberg_catalog(conn_id: str) -> ExternalCatalog:
    """An Iceberg catalog outside the ledger's, from its Airflow connection: a REST catalog (the provider's
    ``kafka_offsets_iceberg_rest`` type), else the database of a SQL catalog (a postgres connection)."""
    from airflow_kafka_offsets.clients.iceberg_rest import CONN_TYPE
    from airflow_kafka_offsets.hooks.connections import get_connection
    from airflow_kafka_offsets.hooks.iceberg_rest import IcebergRestCatalogHook
    from airflow_kafka_offsets.hooks.ledger import deadline_catalog_uri

    connection = get_connection(conn_id, "Iceberg catalog")
    if connection.conn_type == CONN_TYPE:
        return IcebergRestCatalogHook(conn_id).config()
    return deadline_catalog_uri(conn_id, connection)


# Every sink the package opens reaches S3 and external catalogs through Airflow's connections.
AIRFLOW_SINKS = SinkOpener(object_storage=object_storage, external_catalog=iceberg_catalog)


def schema_registry_access(conn_id: str) -> dict[str, Any]:
    """How Spark reaches the schema registry of connection ``conn_id`` (Avro batches; holds secrets)."""
    from airflow_kafka_offsets.clients.avro_registry import spark_registry_config
    from airflow_kafka_offsets.hooks.schema_registry import SchemaRegistryHook

    return spark_registry_config(SchemaRegistryHook(conn_id, purpose="for Avro decoding").access())


def spark_settings(options: SparkJobOptions, output_root: str | None = None) -> SparkSettings:
    """Spark settings with the connector jars or packages of the config section as defaults; S3A
    settings for an ``s3://`` ``output_root`` go in the private conf (the job file, never argv), less
    the deadlines the options' own conf sets (which would otherwise be replaced)."""
    storage = object_storage(output_root) if output_root else None
    return options.settings(
        default_jars=split_list(config_value("spark_jars", "")),
        default_packages=split_list(config_value("spark_packages", "")),
        storage=storage,
        private_conf=s3a_spark_conf(storage, options.conf) if storage is not None else None,
        class_archive_dir=config_value("spark_class_archive_dir", "") or None,
        spark_version=config_value("spark_version", "") or None,
        registry_access=schema_registry_access,
    )


def spark_runner(options: SparkJobOptions, output_root: str | None = None, log_file: str | None = None) -> BatchRunner:
    """spark-submit, or Spark Connect for a ``spark_connect`` connection, with :func:`spark_settings`;
    ``log_file``: where spark-submit's output goes instead of the log (the CLI without ``--verbose``)."""
    return settings_runner(replace(spark_settings(options, output_root), log_file=log_file))


def settings_runner(settings: SparkSettings) -> BatchRunner:
    """The runner of ``settings`` with their Spark connection, read from Airflow here, once: a missing
    one, or one without a host, is refused now, before anything is planned."""
    return batch_runner(settings, spark_connection(settings.conn_id))


def actor_from_context(context: Mapping[str, Any]) -> Actor:
    """Which Airflow run and try did this, for the ledger's audit trail (every key stored, unset ones as null)."""
    ti = context.get("ti")
    return Actor.from_json(
        {
            "dag_id": getattr(ti, "dag_id", None),
            "run_id": getattr(ti, "run_id", None),
            "task_id": getattr(ti, "task_id", None),
            "try_number": getattr(ti, "try_number", None),
            "map_index": getattr(ti, "map_index", None),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }
    )


def cli_actor(command: str) -> Actor:
    """Who ran a CLI command, for the ledger's audit trail."""
    return Actor.from_json(
        {"cli": command, "user": os.environ.get("USER"), "hostname": socket.gethostname(), "pid": os.getpid()}
    )


@dataclass(frozen=True)
class AirflowRuntime:
    """The Airflow connections (by id) and the ledger schema a task, command, trigger or page works
    with; nothing is opened until asked for. ``ledger_schema`` None: ``[kafka_offsets] ledger_schema``."""

    kafka_conn_id: str = DEFAULT_KAFKA_CONN_ID
    postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID
    ledger_schema: str | None = None

    def ledger(self, migrate: bool = True) -> Ledger:
        """The ledger, migrated on first use; ``migrate=False``: as it is, for code that only reads."""
        return LedgerHook(self.postgres_conn_id, ledger_schema(self.ledger_schema)).get_conn(migrate=migrate)

    def kafka_hook(self, timeout_s: float = KAFKA_TIMEOUT_S) -> KafkaClusterHook:
        return KafkaClusterHook(self.kafka_conn_id, timeout_s=timeout_s)

    def kafka(self, timeout_s: float = KAFKA_TIMEOUT_S) -> KafkaOffsetsClient:
        return self.kafka_hook(timeout_s).get_conn()

    def operation_context(
        self,
        request: OperationRequest,
        actor: Actor,
        spark: Callable[[str], BatchRunner],
    ) -> OperationContext:
        """What ``request``'s operation works with; for one that uses Spark, ``spark(output_root)`` makes
        its runner (the pipeline's output root decides S3 settings) and Kafka's settings go with it."""
        ledger = self.ledger()
        hook = self.kafka_hook()
        submit: BatchRunner | None = None
        properties: dict[str, str] = {}
        if operation(request.operation).uses_spark:
            with ledger.transaction() as tx:
                output_root = tx.output_root(request.pipeline)
            submit = spark(output_root)
            properties = hook.spark_properties()
        registry = registry_clients(f"for pipeline {request.pipeline}")
        return OperationContext(ledger, hook.get_conn(), actor, AIRFLOW_SINKS, submit, properties, registry)
