"""Debezium's Avro envelopes into mirror tables: a PostgreSQL table -> Debezium's PostgreSQL connector on Kafka
Connect, values Avro through Apicurio Registry's converter into the stack's schema registry (the Confluent
wire format, a 4-byte id) -> Kafka -> the package's batches (value_format avro, changes debezium) -> an
Iceberg mirror read with PyIceberg, or a Delta one read with delta-rs.

The real converter, not a serializer in the test: the stack's CDC source runs it (``scripts/devstack/cdc.py``,
topics ``cdcavro.*`` with Avro keys, ``cdcjk.*`` with JSON keys for tables named ``jsonkey_*``). After every
batch (inserts, updates, a delete with its tombstone, a primary key change) the mirror equals the source
table, every key once.
"""

from __future__ import annotations

import json
import uuid

import pytest

import devstack
from airflow_kafka_offsets.core.spec import build_spec
from faults_harness import lake_readers

from . import test_debezium_mirror as json_mirror
from .pipeline import run_once
from .test_debezium_mirror import mirror, rows, wait_for_events

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

# the stack's Debezium source and a connection to its database, as the JSON test has them
cdc = json_mirror.cdc
source = json_mirror.source


def first_record(bootstrap: str, topic: str) -> tuple[bytes, bytes]:
    """The key and value of a record Debezium wrote to ``topic`` (as the converters wrote them)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None and message.value() is not None:
                return message.key(), message.value()
        raise AssertionError(f"no record in {topic}")
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("sink_format", "prefix", "key"),
    [
        pytest.param("iceberg", "cdcavro", "avro", id="iceberg-avro-key"),
        pytest.param("delta", "cdcjk", "json", id="delta-json-key", marks=pytest.mark.long),
    ],
)
def test_debezium_avro_envelopes_land_as_a_mirror_equal_to_the_table_after_every_batch(
    stack, ledger, source, tmp_path, sink_format, prefix, key
):
    table = f"{'jsonkey_' if key == 'json' else 'src_'}{uuid.uuid4().hex[:8]}"
    with source.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name TEXT, qty BIGINT)")
    topic = devstack.cdc_topic(table, prefix=prefix)
    spec = build_spec(
        f"dbza_{table}",
        [topic],
        str(tmp_path / "lake"),
        value_format={"type": "avro"},  # subject <topic>-value: the converter's default
        sink={
            "format": sink_format,
            "table": f"mirror.{table}" if sink_format == "iceberg" else table,
            "merge_key": "id",
        },
    )
    events = 0

    def wave(statements: list[str], made: int) -> None:
        nonlocal events
        before = events
        with source.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        events += made
        wait_for_events(stack.bootstrap_servers, topic, events)
        assert run_once(ledger, spec, stack).records == events - before
        assert mirror(stack, ledger, spec) == rows(source, table)

    # inserts, an update, a delete (its event and tombstone)
    wave(
        [
            f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, 'n{i}', {i})" for i in range(1, 11)),
            f"UPDATE {table} SET qty = 100 WHERE id IN (2, 3)",
            f"DELETE FROM {table} WHERE id = 4",
        ],
        10 + 2 + 2,
    )
    # a primary key change (delete, tombstone, create) then an update of the moved key, a delete then a
    # re-insert, an update to a null, deletes of most rows
    wave(
        [
            f"UPDATE {table} SET id = 120 WHERE id = 7",
            f"UPDATE {table} SET qty = 0 WHERE id = 120",
            f"DELETE FROM {table} WHERE id = 5",
            f"INSERT INTO {table} VALUES (5, 'back', 55)",
            f"UPDATE {table} SET name = NULL WHERE id = 9",
            f"DELETE FROM {table} WHERE id < 4",
        ],
        3 + 1 + 2 + 1 + 1 + 2 * 3,
    )
    record_key, value = first_record(stack.bootstrap_servers, topic)
    assert value[0] == 0 and len(value) > 5  # the Confluent wire format: magic byte 0, a 4-byte schema id
    assert record_key[0] == 0 if key == "avro" else record_key.startswith(b"{")
    landed = lake_readers.read_table(stack.pg_url(), ledger.schema, spec).to_pylist()
    assert all(int(r["_source_position"]) > 0 for r in landed)  # Debezium's source.lsn of each row's change
    assert all(r["_source_ts_ms"] > 1_700_000_000_000 and r["_op"] in ("c", "u") for r in landed)  # source.ts_ms
    final = rows(source, table)
    assert 120 in final and 7 not in final and 1 not in final and final[9]["name"] is None


def test_a_reader_schema_that_is_no_envelope_or_lacks_the_key_is_refused_at_plan(stack, ledger, make_topic, tmp_path):
    """The checks only the registry's schema allows (at each plan, before anything is written)."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from airflow_kafka_offsets.errors import InvalidPipelineSpecError
    from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S

    from .helpers import refused
    from .pipeline import plan

    client = SchemaRegistryClient({**stack.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S})
    row = {"type": "record", "name": "Value", "fields": [{"name": "code", "type": "string"}]}
    cases = [
        (row, r"reader schema .*: the reader schema is not a Debezium envelope: it has no op and no after field"),
        (
            {
                "type": "record",
                "name": "Envelope",
                "fields": [
                    {"name": "before", "type": ["null", row], "default": None},
                    {"name": "after", "type": ["null", "Value"], "default": None},
                    {"name": "op", "type": "string"},
                ],
            },
            r"merge_key column\(s\) id are not in the reader schema .*\(code\)",
        ),
    ]
    for i, (schema, message) in enumerate(cases):
        topic = make_topic(partitions=1)
        client.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
        spec = build_spec(
            f"dbza_refused_{i}",
            [topic],
            str(tmp_path / "lake"),
            value_format={"type": "avro"},
            sink={"format": "delta", "table": f"refused_{i}", "merge_key": "id"},
        )
        with refused(InvalidPipelineSpecError, message):
            plan(ledger, spec, stack)
        with ledger.transaction(read_only=True) as tx:
            assert tx.planned_batch_id(spec.name) is None
        assert not (tmp_path / "lake" / f"refused_{i}").exists()  # no table made either
