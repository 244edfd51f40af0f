"""Provider metadata, schema-name quoting, batch ids from templates, version checks, tables."""

from __future__ import annotations

import importlib.metadata

import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets.core.model import PartitionOffsets, PartitionRange, TopicPartition
from airflow_kafka_offsets.core.tables import partition_table
from airflow_kafka_offsets.errors import ConfigurationError, InvalidPipelineSpecError, SparkVersionMismatchError
from airflow_kafka_offsets.ledger.schema import quote_schema
from airflow_kafka_offsets.spark.versions import (
    ClusterSpark,
    check_connect_client,
    check_connector_jars,
    check_connector_packages,
    declared_spark,
    parse_submit_version,
    spark_home_spark,
)
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import connector_coordinates


def test_provider_info_names_the_distribution():
    info = airflow_kafka_offsets.get_provider_info()
    assert info["package-name"] == "airflow-kafka-offsets"
    assert info["versions"][0] == airflow_kafka_offsets.__version__
    entry_points = importlib.metadata.entry_points(group="apache_airflow_provider")
    assert any(ep.value == "airflow_kafka_offsets:get_provider_info" for ep in entry_points)


@pytest.mark.parametrize("name", ["kafka_offsets", "a", "_x1"])
def test_schema_names_accepted(name):
    assert quote_schema(name) == f'"{name}"'


@pytest.mark.parametrize("name", ["", "Kafka", "x;drop table y", 'a"b', "pg_catalog", "1abc", "a" * 64])
def test_schema_names_refused(name):
    with pytest.raises(InvalidPipelineSpecError, match="ledger schema"):
        quote_schema(name)


def test_parse_batch_id():
    from airflow_kafka_offsets.operators.ingest import parse_batch_id

    assert parse_batch_id(None) is None and parse_batch_id("None") is None and parse_batch_id("") is None
    assert parse_batch_id("12") == 12 and parse_batch_id(3) == 3
    with pytest.raises(ConfigurationError):
        parse_batch_id("abc")
    with pytest.raises(ConfigurationError):
        parse_batch_id(0)


SPARK_42 = ClusterSpark("4.2.0", "2.13", "Spark home /opt/spark")


def test_connector_jar_check():
    jars = ["/j/spark-sql-kafka-0-10_2.13-4.2.0.jar", "/j/kafka-clients-3.9.1.jar"]
    check_connector_jars(jars, SPARK_42)
    # the patch release may differ within a line (4.2.1's connector is not always published)
    check_connector_jars(jars, ClusterSpark("4.2.1", "2.13", "x"))
    with pytest.raises(SparkVersionMismatchError, match=r"version 4\.2\.0 for Scala 2\.13 but the Spark that runs"):
        check_connector_jars(jars, ClusterSpark("4.0.1", "2.13", "x"))
    with pytest.raises(SparkVersionMismatchError, match=r"use org\.apache\.spark:spark-sql-kafka-0-10_2\.12:3\.5\.7"):
        check_connector_jars(jars, ClusterSpark("3.5.7", "2.12", "x"))
    with pytest.raises(ConfigurationError, match="none of the configured"):
        check_connector_jars(["/j/kafka-clients-3.9.1.jar"], SPARK_42)


def test_connector_packages_check():
    check_connector_packages(
        ["org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7", "io.delta:x:1"], ClusterSpark("3.5.1-amzn-0", "2.12", "x")
    )
    with pytest.raises(
        SparkVersionMismatchError, match=r"version 4\.2\.0 for Scala 2\.13 but the Spark that runs the batch is 3\.5\.7"
    ):
        check_connector_packages(
            ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"], ClusterSpark("3.5.7", "2.12", "x")
        )


@pytest.mark.parametrize(
    ("version", "coordinates"),
    [
        ("3.5.7", "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7"),
        ("3.5.1-amzn-0", "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.1"),
        ("4.0.1", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"),
        ("4.2.0", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"),
    ],
)
def test_connector_coordinates_follow_the_clusters_spark(version, coordinates):
    assert connector_coordinates(version) == coordinates


def test_unsupported_or_unreadable_spark_versions_are_refused():
    with pytest.raises(
        SparkVersionMismatchError, match=r"Spark 3.4.1 .* does not support: use Spark 3.5, 4.0, 4.1, 4.2"
    ):
        declared_spark("3.4.1", "spark-version of connection 'spark_default'")
    with pytest.raises(ConfigurationError, match="spark-version of connection 'x': 'latest' is not a Spark version"):
        declared_spark("latest", "spark-version of connection 'x'")
    assert declared_spark("4.1.2", "s") == ClusterSpark("4.1.2", "2.13", "s")


def test_spark_submit_version_banner():
    banner = """Welcome to
      ____              __
     / __/__  ___ _____/ /__
    _\\ \\/ _ \\/ _ `/ __/  '_/
   /___/ .__/\\_,_/_/ /_/\\_\\   version 3.5.1-amzn-0
      /_/

Using Scala version 2.12.18, OpenJDK 64-Bit Server VM, 17.0.12
Branch HEAD
"""
    assert parse_submit_version(banner) == ("3.5.1-amzn-0", "2.12")
    assert parse_submit_version("Error: JAVA_HOME is not set") is None


def test_spark_home_version_comes_from_its_core_jar(tmp_path):
    (tmp_path / "jars").mkdir()
    assert spark_home_spark(tmp_path) is None
    (tmp_path / "jars" / "spark-core_2.12-3.5.7.jar").touch()
    assert spark_home_spark(tmp_path) == ClusterSpark("3.5.7", "2.12", f"Spark home {tmp_path}", tmp_path)


def test_a_connect_client_may_be_older_than_its_server_never_newer():
    check_connect_client("4.0.3", "4.2.0", "h:1")
    check_connect_client("4.2.0", "4.2.1", "h:1")
    with pytest.raises(
        SparkVersionMismatchError,
        match=r"server at h:1 runs Spark 4\.0\.3 but this worker's client is pyspark 4\.2\.0.*install pyspark==4\.0\.3",
    ):
        check_connect_client("4.2.0", "4.0.3", "h:1")
    with pytest.raises(SparkVersionMismatchError, match="does not support"):
        check_connect_client("3.4.0", "3.4.0", "h:1")


def test_partition_table():
    text = partition_table([PartitionRange("t", 0, 5, 9, 3)], offsets={TopicPartition("t", 0): PartitionOffsets(5, 12)})
    lines = text.splitlines()
    assert lines[0].split() == [
        "partition",
        "start",
        "end",
        "planned",
        "log",
        "start",
        "log",
        "end",
        "lag",
        "after",
        "lost",
    ]
    assert lines[2].split() == ["t-0", "5", "9", "4", "5", "12", "3", "2"]
