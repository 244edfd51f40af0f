"""How outputs and topics are named for Airflow assets and OpenLineage (pure functions)."""

from __future__ import annotations

import pytest
from airflow.sdk import Asset

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.lineage import (
    BatchLineage,
    dataset_name,
    kafka_server,
    literal_topics,
    pipeline_output_alias,
    topic_asset,
)

PLAN = BatchPlan("orders", 2, 1, (PartitionRange("orders", 0, 5, 9, 5),), "s3://lake/tables/orders")


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("file:///data/out/orders", ("file", "/data/out/orders")),
        ("s3a://lake/warehouse/ns/orders", ("s3a://lake", "warehouse/ns/orders")),
        ("s3://lake/orders", ("s3://lake", "orders")),
    ],
)
def test_openlineage_dataset_names(location: str, expected: tuple[str, str]) -> None:
    assert dataset_name(location) == expected


def test_topic_assets_use_the_first_bootstrap_server() -> None:
    assert topic_asset(kafka_server("k1:9092, k2:9092"), "orders") == Asset(uri="kafka://k1:9092/orders")
    assert pipeline_output_alias("orders").name == "kafka_offsets/orders"


@pytest.mark.parametrize(
    ("topics", "expected"),
    [
        ("orders", ("orders",)),
        ("orders, refunds", ("orders", "refunds")),
        (["refunds", "orders"], ("orders", "refunds")),  # sorted, as the pipeline's spec stores them
        ("{{ var.value.topic }}", None),
        (["orders", "{{ params.topic }}"], None),
        ("", None),
        (["orders", "orders"], None),
        (["orders", 7], None),
        (object(), None),  # e.g. an XComArg: known only at run time
    ],
)
def test_only_literal_topics_are_known_when_a_dag_is_parsed(topics: object, expected: tuple[str, ...] | None) -> None:
    assert literal_topics(topics) == expected


def test_a_table_is_its_own_location_a_directory_sink_gets_one_per_pipeline() -> None:
    table = {"format": "iceberg", "location": "s3://lake/tables/orders", "table": "kafka_offsets.ns.orders"}
    lineage = BatchLineage("orders", "k1:9092", ("orders",), table, PLAN, 5)
    assert lineage.location == "s3://lake/tables/orders"
    assert lineage.batch_facts()["output_table"] == "kafka_offsets.ns.orders"
    directory = {"format": "directory", "location": "file:///out", "table": None}
    assert BatchLineage("orders", "k1:9092", ("orders",), directory).location == "file:///out/orders"
    assert BatchLineage("orders", "k1:9092", ("orders",), directory).batch_facts() == {}
