"""Check that the pyspark that runs is the one the Kafka connector jars were built for.

The Spark provider depends on ``pyspark-client``, which installs into the same
``pyspark/`` directory as ``pyspark``; mismatched versions leave Python files
of one release next to the JVM jars of another. Run ``python -m
airflow_kafka_offsets.clients.versions`` to see what is installed.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Sequence
from pathlib import Path

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import CONNECTOR_JAR

CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"


def distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def local_pyspark_version() -> str:
    """The version of the pyspark Python files, checked against the installed pyspark wheel and its jars."""
    try:
        import pyspark
    except ImportError as exc:
        raise ConfigurationError("pyspark is not installed") from exc
    files_version = pyspark.__version__
    wheel_version = distribution_version("pyspark")
    if wheel_version is not None and wheel_version != files_version:
        raise ConfigurationError(
            f"pyspark's Python files are version {files_version} but the pyspark wheel is {wheel_version} "
            f"(pyspark-client {distribution_version('pyspark-client')} was installed over it?): "
            f"reinstall with `pip install --force-reinstall --no-deps pyspark=={wheel_version}`"
        )
    jars = Path(pyspark.__file__).parent / "jars"
    core = sorted(jars.glob("spark-core_2.13-*.jar"))
    if core and f"-{files_version}.jar" not in core[0].name:
        raise ConfigurationError(f"pyspark {files_version} ships {core[0].name}: the install is mixed")
    return files_version


def connector_coordinates(spark_version: str) -> str:
    return f"org.apache.spark:{CONNECTOR_ARTIFACT}:{spark_version}"


def check_connector_jars(jars: Sequence[str], spark_version: str) -> None:
    """Local connector jars must be built for the Spark that will run them."""
    found = [m.group(1) for j in jars if (m := CONNECTOR_JAR.search(j))]
    if not found:
        raise ConfigurationError(
            f"none of the configured Spark jars is {CONNECTOR_ARTIFACT} (Spark's Kafka connector): {list(jars)}"
        )
    wrong = sorted(set(found) - {spark_version})
    if wrong:
        raise ConfigurationError(
            f"the Kafka connector jar is version {', '.join(wrong)} but pyspark is {spark_version}: "
            f"use {connector_coordinates(spark_version)}"
        )


# Spark's own readers of the tables the sinks write, per Spark line (Maven Central, Nov 2026). The
# sinks need none of them: Spark writes plain Parquet and the commits run in Python.
TABLE_READER_PACKAGES: dict[str, dict[str, str]] = {
    "iceberg": {
        "4.0": "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0",
        "4.1": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0",
    },
    "delta": {
        "4.1": "io.delta:delta-spark_4.1_2.13:4.4.0",
        "4.2": "io.delta:delta-spark_4.2_2.13:4.4.0",
    },
}


def table_reader_package(table_format: str, spark_version: str) -> str:
    """The ``spark.jars.packages`` entry that lets this Spark read the sink's tables; refused when none exists."""
    line = ".".join(spark_version.split(".")[:2])
    by_line = TABLE_READER_PACKAGES.get(table_format, {})
    if line not in by_line:
        raise ConfigurationError(
            f"no {table_format} runtime for Spark {line} is released (known: "
            f"{', '.join(f'Spark {v}' for v in by_line) or 'none'}): read the table with Spark "
            f"{' or '.join(by_line) or '-'}, or another engine (PyIceberg, delta-rs, Trino, DuckDB)"
        )
    return by_line[line]


def main() -> int:
    try:
        version = local_pyspark_version()
    except ConfigurationError as exc:
        print(f"versions: {exc}", file=sys.stderr)
        return 1
    print(
        f"versions: pyspark {version} (pyspark-client {distribution_version('pyspark-client')}), "
        f"apache-airflow {distribution_version('apache-airflow')}, "
        f"confluent-kafka {distribution_version('confluent-kafka')}, "
        f"connector {connector_coordinates(version)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
