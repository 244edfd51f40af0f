"""Provider metadata, schema-name quoting, batch ids from templates, version checks, tables."""

from __future__ import annotations

import importlib.metadata

import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets.clients.versions import check_connector_jars
from airflow_kafka_offsets.core.model import PartitionOffsets, PartitionRange, TopicPartition
from airflow_kafka_offsets.core.tables import partition_table
from airflow_kafka_offsets.errors import ConfigurationError, InvalidPipelineSpecError
from airflow_kafka_offsets.ledger.schema import quote_schema


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


def test_connector_jar_check():
    jars = ["/j/spark-sql-kafka-0-10_2.13-4.2.0.jar", "/j/kafka-clients-3.9.1.jar"]
    check_connector_jars(jars, "4.2.0")
    with pytest.raises(ConfigurationError, match="version 4.2.0 but pyspark is 4.3.0"):
        check_connector_jars(jars, "4.3.0")
    with pytest.raises(ConfigurationError, match="none of the configured"):
        check_connector_jars(["/j/kafka-clients-3.9.1.jar"], "4.2.0")


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
