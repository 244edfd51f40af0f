"""The whole chain: a PostgreSQL table -> Debezium's PostgreSQL connector on Kafka Connect -> Kafka -> the
package's batches -> an Iceberg mirror table read with PyIceberg, or a Delta one read with delta-rs.

The stack's CDC source (``devstack.start_cdc()``, as ``scripts/stack up --cdc``): Debezium 3.6.1 with the
pgoutput plugin, JSON with the embedded schema. A workload of inserts, updates, deletes and a primary key
update runs on the source table in waves; after each committed batch the mirror equals the source table
as of that batch, row for row; one commit dies between the table's commit and the ledger's first, and a
later batch's Spark (spark-submit) is SIGKILLed mid-read, then its retry's commit dies inside the ledger's
transaction.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
from confluent_kafka import KafkaException, TopicPartition

import devstack
from airflow_kafka_offsets.core.model import BatchState, PipelineSpec
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError
from airflow_kafka_offsets.ledger import Ledger
from faults_harness import lake_readers

from .pipeline import commit, commit_dies_at, plan, read, read_killed_in_spark, run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

MIRROR_ONLY = ("_kafka_partition", "_kafka_offset", "_source_position", "_source_ts_ms", "_op")


@pytest.fixture(scope="module")
def cdc(stack) -> dict[str, Any]:
    """The stack's Debezium source, started for the tests that need it (a failed start fails them)."""
    cfg = devstack.start_cdc()
    print(f"Kafka Connect with Debezium: started in {cfg.get('start_s')}s")
    return cfg


@pytest.fixture()
def source(stack, cdc) -> Iterator[Any]:
    conn = psycopg2.connect(stack.pg_dsn(cdc["database"]))
    conn.autocommit = True
    yield conn
    conn.close()


def end_offsets(bootstrap: str, topic: str) -> int:
    """Records (and tombstones) Debezium wrote to ``topic`` so far: the sum of its end offsets."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            return 0
        total = 0
        for partition in metadata.partitions:
            try:
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            except KafkaException:  # the topic Connect just created has no leader yet
                return 0
            total += high
        return total
    finally:
        consumer.close()


def wait_for_events(bootstrap: str, topic: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (found := end_offsets(bootstrap, topic)) < count:
        assert time.monotonic() < deadline, f"Debezium wrote {found} of {count} events to {topic}"
        time.sleep(0.2)
    assert found == count, f"Debezium wrote {found} events to {topic}, expected {count}"


def rows(conn, table: str) -> dict[int, dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, name, qty FROM {table}")
        return {r[0]: {"id": r[0], "name": r[1], "qty": r[2]} for r in cur.fetchall()}


def mirror(stack, ledger: Ledger, spec: PipelineSpec) -> dict[int, dict[str, Any]]:
    found = lake_readers.read_table(stack.pg_url(), ledger.schema, spec).to_pylist()
    by_key = {r["id"]: {k: v for k, v in r.items() if k not in MIRROR_ONLY} for r in found}
    assert len(by_key) == len(found), "a key holds two rows"
    return by_key


@pytest.mark.parametrize("sink_format", ["iceberg", "delta"])
def test_a_postgres_table_through_debezium_lands_as_a_mirror_equal_to_it_after_every_batch(
    stack, ledger, source, tmp_path, sink_format
):
    table = f"src_{uuid.uuid4().hex[:8]}"
    with source.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name TEXT, qty BIGINT)")
    topic = devstack.cdc_topic(table)
    spec = build_spec(
        f"dbz_{table}",
        [topic],
        str(tmp_path / "lake"),
        json_schema="id INT, name STRING, qty BIGINT",
        sink={
            "format": sink_format,
            "table": f"mirror.{table}" if sink_format == "iceberg" else table,
            "merge_key": "id",
        },
    )
    events = 0

    def run(statements: list[str], made: int) -> None:
        nonlocal events
        with source.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        events += made
        wait_for_events(stack.bootstrap_servers, topic, events)

    # wave 1: inserts, an update, a delete (its event and tombstone)
    run(
        [
            f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, 'n{i}', {i})" for i in range(1, 21)),
            f"UPDATE {table} SET qty = 100 WHERE id IN (2, 3)",
            f"DELETE FROM {table} WHERE id = 4",
        ],
        20 + 2 + 2,
    )
    assert run_once(ledger, spec, stack).records == 24
    assert mirror(stack, ledger, spec) == rows(source, table)

    # wave 2: a primary key update (delete, tombstone, create), a delete then re-insert, updates;
    # the commit dies after the table's commit, before the ledger's
    run(
        [
            f"UPDATE {table} SET id = 120 WHERE id = 12",
            f"DELETE FROM {table} WHERE id = 5",
            f"INSERT INTO {table} VALUES (5, 'back', 55)",
            f"UPDATE {table} SET name = 'x' WHERE id > 15",
            f"INSERT INTO {table} VALUES (30, 'new', 30)",
        ],
        3 + 2 + 1 + 6 + 1,
    )
    before = mirror(stack, ledger, spec)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
    assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
    # Iceberg's merge moves with the ledger's transaction; Delta's log commits first (its retry merges nothing)
    assert mirror(stack, ledger, spec) == (before if sink_format == "iceberg" else rows(source, table))
    assert commit(ledger, spec, outcome.plan.batch_id).committed_now
    assert mirror(stack, ledger, spec) == rows(source, table)

    # wave 3: deletes of most rows, an update of a moved key; Spark (spark-submit) SIGKILLed once its app runs, the
    # retry (on the Connect server) read, its commit killed inside the ledger's transaction, then committed
    run([f"DELETE FROM {table} WHERE id < 10", f"UPDATE {table} SET qty = 0 WHERE id = 120"], 2 * 8 + 1)
    before = mirror(stack, ledger, spec)
    outcome = plan(ledger, spec, stack)
    killed = read_killed_in_spark(ledger, spec, stack, outcome)
    assert isinstance(killed, SparkJobError), killed
    assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
    assert mirror(stack, ledger, spec) == before  # nothing of the killed attempt reached the mirror
    read(ledger, spec, stack, outcome)
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "in_commit_transaction")
    assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
    assert commit(ledger, spec, outcome.plan.batch_id).committed_now
    with ledger.transaction() as tx:
        attempts = sorted(a.state for a in tx.attempts(spec.name, [outcome.plan.batch_id]))
    assert attempts == ["failed", "succeeded"], attempts  # the killed one, and the retry's
    final = rows(source, table)
    assert mirror(stack, ledger, spec) == final and 120 in final and 1 not in final
    positions = lake_readers.read_table(stack.pg_url(), ledger.schema, spec).column("_source_position").to_pylist()
    assert all(p is not None and int(p) > 0 for p in positions)  # Debezium's source.lsn of each row's change
