"""The stack itself: Kafka, Spark with the connector, PostgreSQL, and a trivial Airflow DAG."""

from __future__ import annotations

import uuid

import psycopg2
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.jobs import build_job
from airflow_kafka_offsets.spark.settings import SparkSettings

from .helpers import local_path, produce, statistics_per_column
from .pipeline import submitter


def consume_range(bootstrap: str, topic: str, partition: int, start: int, end: int) -> list[dict]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, partition, start)])
    out: list[dict] = []
    while not out or out[-1]["offset"] < end - 1:
        msg = consumer.poll(10)
        assert msg is not None, f"timed out reading {topic}-{partition} at {out[-1]['offset'] if out else start}"
        assert msg.error() is None, msg.error()
        kind, ts = msg.timestamp()
        out.append(
            {
                "key": msg.key(),
                "value": msg.value(),
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "timestamp_ms": ts,
                "timestampType": kind - 1,
                "headers": [{"key": k, "value": v} for k, v in msg.headers() or []],
            }
        )
    consumer.close()
    return [r for r in out if r["offset"] < end]


def test_spark_reads_exact_offset_ranges_record_by_record(stack, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 60, partitions=2)
    ranges = (PartitionRange(topic, 0, 3, 17, 3), PartitionRange(topic, 1, 0, 30, 0))
    staging = (tmp_path / "staging").as_uri()
    job = build_job(
        BatchPlan("smoke", 1, 0, ranges, "unused"), "a1", staging, {"bootstrap.servers": stack.bootstrap_servers}
    )
    submitter(stack)(job)
    got = sorted(pq.read_table(local_path(staging)).to_pylist(), key=lambda r: (r["partition"], r["offset"]))
    expected = consume_range(stack.bootstrap_servers, topic, 0, 3, 17) + consume_range(
        stack.bootstrap_servers, topic, 1, 0, 30
    )
    assert len(got) == 14 + 30
    for g, e in zip(got, expected):
        assert (g["key"], g["value"], g["topic"], g["partition"], g["offset"]) == (
            e["key"],
            e["value"],
            e["topic"],
            e["partition"],
            e["offset"],
        )
        assert int(g["timestamp"].timestamp() * 1000) == e["timestamp_ms"]
        assert g["timestampType"] == e["timestampType"]
        assert g["headers"] == e["headers"]


@pytest.mark.parametrize("mode", ["spark-submit", "spark-connect"])
def test_a_parquet_writer_setting_in_spark_conf_reaches_the_writer_in_both_execution_modes(
    request, stack, make_topic, tmp_path, mode
):
    # Spark Connect takes spark.hadoop.* settings (the package's zstd level among them) as session
    # conf under their Hadoop names; spark-submit strips the prefix itself.
    conn_id = request.getfixturevalue("spark_connect") if mode == "spark-connect" else "spark_default"
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 40, partitions=2)
    staging = (tmp_path / "staging").as_uri()
    plan = BatchPlan("writer", 1, 0, (PartitionRange(topic, 0, 0, 20, 0), PartitionRange(topic, 1, 0, 20, 0)), "x")
    runner = settings_runner(
        SparkSettings(
            conn_id=conn_id,
            jars=tuple(stack.connector_jars),
            conf={"spark.hadoop.parquet.column.statistics.enabled#value": "false"},
        )
    )
    runner(build_job(plan, "a1", staging, {"bootstrap.servers": stack.bootstrap_servers}))
    chunks = statistics_per_column(local_path(staging), ["key", "value"])
    assert chunks == {"key": {True}, "value": {False}}  # statistics: Parquet's default, and as set


def test_postgres_accepts_connections(stack):
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_setting('server_version_num')::int / 10000")
        assert cur.fetchone()[0] == 15
    conn.close()
