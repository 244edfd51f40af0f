"""The ``[kafka_offsets]`` Airflow config section, and the settings built from it.

Operators, the manual operations and the CLI take their defaults from here, so one
setting means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_kafka_offsets.clients.spark_submit import SparkSettings, split_list

CONFIG_SECTION = "kafka_offsets"
DEFAULT_LEDGER_SCHEMA = "kafka_offsets"


def config_value(key: str, fallback: str) -> str:
    """A setting of the section (an empty value means the fallback)."""
    from airflow.sdk import conf

    return conf.get(CONFIG_SECTION, key, fallback=fallback) or fallback


def ledger_schema(explicit: str | None = None) -> str:
    return explicit or config_value("ledger_schema", DEFAULT_LEDGER_SCHEMA)


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
) -> SparkSettings:
    """Spark settings with the connector jars or packages of the config section as defaults."""
    return SparkSettings(
        conn_id=conn_id,
        jars=split_list(jars) or split_list(config_value("spark_jars", "")),
        packages=split_list(packages) or split_list(config_value("spark_packages", "")),
        conf=dict(conf or {}),
        private_conf=dict(private_conf or {}),
        executor_cores=executor_cores,
        executor_memory=executor_memory,
        driver_memory=driver_memory,
        num_executors=num_executors,
        total_executor_cores=total_executor_cores,
    )
