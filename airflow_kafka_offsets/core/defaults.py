"""The names used when none is given: the Airflow connections and the ledger's schema.

Plain values, importable from every layer (the ``[kafka_offsets]`` config section, which may
override the schema, is :mod:`airflow_kafka_offsets.config`).
"""

from __future__ import annotations

DEFAULT_LEDGER_SCHEMA = "kafka_offsets"

# The Airflow connections used when none is named (the Kafka one is the apache-kafka provider's default).
DEFAULT_KAFKA_CONN_ID = "kafka_default"
DEFAULT_POSTGRES_CONN_ID = "postgres_default"
DEFAULT_SPARK_CONN_ID = "spark_default"
DEFAULT_OBJECT_STORAGE_CONN_ID = "aws_default"

# How long a step waits for Kafka's answers when no timeout is given.
KAFKA_TIMEOUT_S = 30.0
