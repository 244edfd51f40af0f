"""A failed Spark read names its root cause (found in Spark's output) and the next step, not the command line.

Real Kafka, PostgreSQL and Spark: records deleted on the broker below a planned batch's end,
and a connector without its dependencies. Two spark-submits.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as KafkaTP

from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkConnectorMissingError, SparkDataLossError
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink
from airflow_kafka_offsets.spark.settings import SparkSettings

from .helpers import produce
from .pipeline import ACTOR, plan


def assert_nothing_moved(ledger, pipeline: str, batch_id: int, cursors: dict) -> str:
    """The batch is still planned, the cursor where it was, one failed attempt; returns its error."""
    assert ledger.cursors(pipeline) == cursors
    assert ledger.committed_batches(pipeline) == []
    with ledger.transaction() as tx:
        assert tx.planned_batch_id(pipeline) == batch_id
        attempts = tx.fetchall("SELECT state, error FROM {s}.attempts WHERE pipeline = %s", (pipeline,))
    assert [a[0] for a in attempts] == ["failed"]
    return attempts[0][1]


def assert_no_command_line(message: str) -> None:
    for fragment in ("Cannot execute", "spark-submit", "--master", "--job-file", "Error code is"):
        assert fragment not in message, f"{fragment!r} in {message!r}"


def test_records_deleted_below_a_planned_batch_fail_naming_topic_partition_and_span(
    stack, ledger, make_topic, kafka_admin, tmp_path
):
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 300, partitions=1)
    spec = build_spec("deleted", [topic], str(tmp_path))
    planned = plan(ledger, spec, stack).plan
    assert [(r.start, r.end) for r in planned.ranges] == [(0, 300)]
    cursors = ledger.cursors("deleted")
    kafka_admin.delete_records([KafkaTP(topic, 0, 200)])[KafkaTP(topic, 0, 200)].result(timeout=30)

    submitter = settings_runner(SparkSettings(jars=stack.connector_jars))
    with pytest.raises(SparkDataLossError) as err:
        run_batch(
            ledger,
            LocalDirectorySink(str(tmp_path)),
            planned,
            submitter,
            {"bootstrap.servers": stack.bootstrap_servers},
            ACTOR,
            min_partitions=1,
        )
    message = str(err.value)
    assert message.startswith(
        f"Spark job for batch 1 of pipeline 'deleted' failed: records of the batch are no "
        f"longer in Kafka: Spark could not read {topic}-0 offsets [0, 300) (retention or "
        "delete-records removed records after the batch was planned). Next: these records "
        "cannot be read again: abort the planned batch"
    )
    assert "abort the planned batch" in message and "on_data_loss='skip'" in message
    assert_no_command_line(message)
    assert "SparkDataLossError" in assert_nothing_moved(ledger, "deleted", 1, cursors)
    assert cursors == {TP(topic, 0): 0}


def test_a_connector_without_its_dependencies_fails_naming_the_classpath(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    spec = build_spec("no_connector", [topic], str(tmp_path))
    planned = plan(ledger, spec, stack).plan
    cursors = ledger.cursors("no_connector")
    connector_only = tuple(j for j in stack.connector_jars if "spark-sql-kafka" in j)
    assert len(connector_only) == 1

    with pytest.raises(SparkConnectorMissingError) as err:
        run_batch(
            ledger,
            LocalDirectorySink(str(tmp_path)),
            planned,
            settings_runner(SparkSettings(jars=connector_only)),
            {"bootstrap.servers": stack.bootstrap_servers},
            ACTOR,
        )
    message = str(err.value)
    assert message.startswith(
        "Spark job for batch 1 of pipeline 'no_connector' failed: Spark's Kafka connector or "
        "one of its dependencies is not on Spark's classpath"
    )
    assert "kafka-clients" in message and "org/apache/kafka/" in message  # the missing class, from Spark's output
    assert_no_command_line(message)
    assert "SparkConnectorMissingError" in assert_nothing_moved(ledger, "no_connector", 1, cursors)
