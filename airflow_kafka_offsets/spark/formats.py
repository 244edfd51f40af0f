"""What a batch's value format adds to its Spark job: Spark's Avro module, and the schema registry's access.

An Avro batch's app calls Spark's ``from_avro``, which lives in ``org.apache.spark:spark-avro`` (not in
Spark's own jars): spark-submit gets it like the Kafka connector, built for the Spark that runs the
batch (``--packages`` with the connector's defaults, at a release the repository serves; configured
jars or packages that hold it are checked for that Spark line instead). A Spark Connect server needs
it on its own classpath. The app fetches each writer schema from the registry itself; the registry's
URLs and credentials reach it in the private job file (spark-submit) or in this process's memory
(Spark Connect), never on a command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kafka_offsets.errors import ConfigurationError, SparkVersionMismatchError
from airflow_kafka_offsets.spark.published import AVRO_ARTIFACTS, published_release
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.versions import ClusterSpark
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import (
    AVRO_ARTIFACT,
    AVRO_JAR,
    REGISTRY_ACCESS,
    spark_line,
    spark_release,
)


def is_avro_job(job: Mapping[str, Any]) -> bool:
    decode = job.get("decode") or {}
    return decode.get("format") == "avro"


def avro_coordinates(spark: ClusterSpark, release: str | None = None) -> str:
    """The Maven coordinates of Spark's Avro module built for this Spark (at ``release`` of its line:
    default, the Spark's own)."""
    return f"org.apache.spark:{AVRO_ARTIFACT}_{spark.scala}:{release or spark_release(spark.version)}"


def _mismatch(version: str, scala: str, spark: ClusterSpark) -> str | None:
    if spark_line(version) == spark.line and scala == spark.scala:
        return None
    return (
        f"Spark's Avro module is version {version} for Scala {scala} but the batch runs on {spark.describe()}: "
        f"use {avro_coordinates(spark)}"
    )


def job_dependencies(
    job: Mapping[str, Any],
    spark: ClusterSpark,
    jars: Sequence[str],
    packages: Sequence[str],
    conf: Mapping[str, str] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The jars and packages of the job's spark-submit: with Avro decoding, Spark's Avro module too (at
    the nearest release of the Spark's line its Maven repository serves; ``conf``: the job's Spark conf)."""
    jars, packages = tuple(jars), tuple(packages)
    if not is_avro_job(job):
        return jars, packages
    given = [(m.group(2), m.group(1)) for j in jars if (m := AVRO_JAR.search(j))]
    for package in packages:
        group, _, rest = package.partition(":")
        artifact, _, version = rest.partition(":")
        if group == "org.apache.spark" and artifact.startswith(AVRO_ARTIFACT + "_"):
            given.append((version, artifact.rsplit("_", 1)[1]))
    for version, scala in given:
        problem = _mismatch(version, scala, spark)
        if problem:
            raise SparkVersionMismatchError(problem)
    if given:
        return jars, packages
    return jars, (*packages, avro_coordinates(spark, published_release(AVRO_ARTIFACTS, spark, conf or {})))


def with_registry_access(job: Mapping[str, Any], settings: SparkSettings) -> dict[str, Any]:
    """The job with its schema registry's access (Avro decoding), for the private job file only."""
    if not is_avro_job(job):
        return dict(job)
    conn_id = str(job["decode"]["registry_conn_id"])
    if settings.registry_access is None:
        raise ConfigurationError(
            f"batch {job['batch_id']} of pipeline {job['pipeline']!r} decodes Avro values: Spark needs the schema "
            f"registry of connection {conn_id!r}, and these Spark settings give no registry access"
        )
    return {**job, REGISTRY_ACCESS: dict(settings.registry_access(conn_id))}
