"""Exactly-once batch ingestion from Apache Kafka with Apache Spark, for Apache Airflow.

Each batch is planned (exact offset ranges written to a PostgreSQL ledger),
read by a PySpark job, and committed: the output is published and the
pipeline's cursor advances in the one transaction that marks the batch
committed.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point."""
    from airflow_kafka_offsets.clients import iceberg_rest, schema_registry
    from airflow_kafka_offsets.core.defaults import (
        DEFAULT_KAFKA_CONN_ID,
        DEFAULT_LEDGER_SCHEMA,
        DEFAULT_OBJECT_STORAGE_CONN_ID,
        DEFAULT_POSTGRES_CONN_ID,
    )
    from airflow_kafka_offsets.object_storage.connection import connection_type_info

    return {
        "package-name": "airflow-kafka-offsets",
        "name": "Kafka Offsets (exactly-once Kafka to Spark batches)",
        "description": __doc__.strip().splitlines()[0],
        "versions": [__version__],
        "operators": [
            {
                "integration-name": "Kafka Offsets",
                "python-modules": [
                    "airflow_kafka_offsets.operators.plan",
                    "airflow_kafka_offsets.operators.read",
                    "airflow_kafka_offsets.operators.commit",
                    "airflow_kafka_offsets.operators.task_group",
                    "airflow_kafka_offsets.operators.manual",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": "Kafka Offsets",
                "python-modules": [
                    "airflow_kafka_offsets.hooks.iceberg_rest",
                    "airflow_kafka_offsets.hooks.kafka",
                    "airflow_kafka_offsets.hooks.ledger",
                    "airflow_kafka_offsets.hooks.object_storage",
                    "airflow_kafka_offsets.hooks.schema_registry",
                ],
            }
        ],
        "connection-types": [
            connection_type_info(),
            schema_registry.connection_type_info(),
            iceberg_rest.connection_type_info(),
        ],
        "triggers": [
            {
                "integration-name": "Kafka Offsets",
                "python-modules": ["airflow_kafka_offsets.triggers.lag", "airflow_kafka_offsets.triggers.retention"],
            }
        ],
        "cli": ["airflow_kafka_offsets.cli.definition.get_cli_commands"],
        "config": {
            "kafka_offsets": {
                "description": "Defaults for the Kafka Offsets operators.",
                "options": {
                    "spark_jars": {
                        "description": "Comma-separated local paths of Spark's Kafka connector jars "
                        "(spark-sql-kafka-0-10 and its dependencies) handed to spark-submit --jars.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/opt/jars/spark-sql-kafka-0-10_2.13-4.2.0.jar,...",
                        "default": "",
                    },
                    "spark_packages": {
                        "description": "Maven coordinates handed to spark-submit --packages when no "
                        "spark_jars are set. Empty means the connector built for the Spark that runs the batch "
                        "(spark_version, else the one the Spark connection's spark-submit runs).",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
                        "default": "",
                    },
                    "spark_version": {
                        "description": "The version of the Spark that spark-submit batches run on, when it "
                        "cannot be found from the spark-submit on the worker's PATH (a cluster client that is "
                        "not a Spark home). The Spark connection's spark-version extra wins. Empty: found.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "3.5.1",
                        "default": "",
                    },
                    "spark_class_archive_dir": {
                        "description": "A directory on the worker for a class-data-sharing archive of "
                        "spark-submit's driver JVM: the first batch writes it (slower, once), later batches "
                        "map Spark's classes from it instead of loading them. Empty: no archive. Client "
                        "deploy mode only.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "/var/cache/airflow-kafka-offsets/jvm",
                        "default": "",
                    },
                    "attempt_lease_seconds": {
                        "description": "How long a Spark attempt counts as alive without a heartbeat; its "
                        "worker renews the lease every quarter of it while spark-submit runs.",
                        "version_added": "0.2.0",
                        "type": "float",
                        "example": "120",
                        "default": "120",
                    },
                    "attempt_wait_seconds": {
                        "description": "How long a read waits for another run's live attempt of the same "
                        "batch before failing with PipelineBusyError.",
                        "version_added": "0.2.0",
                        "type": "float",
                        "example": "3600",
                        "default": "3600",
                    },
                    "ui_postgres_conn_id": {
                        "description": "PostgreSQL connection of the ledger read by the Kafka pipelines page.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": DEFAULT_POSTGRES_CONN_ID,
                        "default": DEFAULT_POSTGRES_CONN_ID,
                    },
                    "ui_kafka_conn_id": {
                        "description": "Kafka connection the Kafka pipelines page asks for end offsets.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": DEFAULT_KAFKA_CONN_ID,
                        "default": DEFAULT_KAFKA_CONN_ID,
                    },
                    "object_storage_conn_id": {
                        "description": "Connection of the S3 object storage holding s3:// output roots: of "
                        "type kafka_offsets_object_storage (S3-compatible object storage) or aws.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "lake_s3",
                        "default": DEFAULT_OBJECT_STORAGE_CONN_ID,
                    },
                    "ledger_schema": {
                        "description": "PostgreSQL schema holding the ledger tables.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": DEFAULT_LEDGER_SCHEMA,
                        "default": DEFAULT_LEDGER_SCHEMA,
                    },
                },
            }
        },
    }
