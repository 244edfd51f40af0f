"""Mirror tables (merge mode) on the real stack: change events in Kafka, Spark's change set, the
Iceberg commit in the ledger's transaction, read back with PyIceberg (which knows nothing of the ledger).
The upsert and schema test runs on a Delta mirror too (the rest of Delta's: test_delta_mirror.py).

The events (``cdc_source.Source``) follow Debezium's PostgreSQL connector's JSON; its model of the source
table is the truth the mirror is compared with after every committed batch, row for row, with each row's
provenance.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyiceberg.expressions import EqualTo

from airflow_kafka_offsets.core.model import BatchState, PipelineSpec, batch_directory
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.errors import MergeOperationRefusedError, SchemaEvolutionError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service import faults
from airflow_kafka_offsets.service.operations.change_spec import change_spec
from airflow_kafka_offsets.service.operations.replay import replay_batch
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REWRITES_DIR
from faults_harness import lake_readers

from .cdc_source import Source, first_changes, mirror, mirror_spec, moving_changes, two_random_batches
from .helpers import refused
from .pipeline import commit, commit_dies_at, operation_context, plan, read, run_once, sink_of, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


def snapshots(stack, ledger: Ledger, spec: PipelineSpec) -> list[Any]:
    return list(lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).snapshots())


def data_files(stack, ledger: Ledger, spec: PipelineSpec) -> list[str]:
    return [
        t.file.file_path for t in lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).scan().plan_files()
    ]


def test_debezium_changes_mirror_the_source_after_every_batch_through_a_crash_and_a_maintenance_commit(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=2)
    spec = mirror_spec("mirror_dbz", topic, str(tmp_path / "lake"))
    source = Source(stack.bootstrap_servers, topic)

    # batch 1: a snapshot's worth of inserts, an update and a delete of rows inserted in the same batch
    first_changes(source)
    assert run_once(ledger, spec, stack).records == 14  # with the tombstone after the delete
    assert mirror(stack, ledger, spec) == source.expected
    assert len(source.expected) == 10

    # batch 2 (the embedded-schema form): new keys in a range of their own, a delete then re-insert of one key,
    # a primary key change, a delete; its commit dies between the table's commit and the ledger's first
    moving_changes(source, range(100, 111))
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    before = mirror(stack, ledger, spec)
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
    assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
    assert mirror(stack, ledger, spec) == before  # the merge moved with the ledger's transaction: not at all
    done = commit(ledger, spec, outcome.plan.batch_id)
    assert done.committed_now
    assert mirror(stack, ledger, spec) == source.expected
    assert {5, 70, 100, 110} <= set(source.expected) and not {7, 9} & set(source.expected)

    # batch 3: a change to one key rewrites only the data file that holds it (keys 100-110 are a file of their
    # own). Another writer, whose base was read before, commits while the merge holds the table's catalog
    # row: it waits, finds the table moved and redoes its commit on the merged state (PyIceberg retries an
    # append), so neither commit is lost and neither is applied on the state the other replaced
    source.update(105, qty=0)
    source.flush()
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    batch = outcome.plan.batch_id
    stale = lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec)
    extra = stale.scan(limit=1).to_arrow()
    extra = extra.set_column(0, "id", pa.array([999], pa.int32()))
    writer = threading.Thread(target=stale.append, args=(extra,))

    def start_other_writer(point: str) -> None:
        if point == "after_publish":  # the merge is in the table's locked catalog row, not committed yet
            writer.start()
            writer.join(2)
            assert writer.is_alive()

    faults._observers.append(start_other_writer)
    try:
        commit(ledger, spec, batch)
    finally:
        faults._observers.remove(start_other_writer)
    writer.join(120)
    history = snapshots(stack, ledger, spec)
    merged_last = [s for s in history if s.summary.additional_properties.get("kafka-offsets.batch") == str(batch)][-1]
    assert history[-1].parent_snapshot_id == merged_last.snapshot_id  # the other writer's commit, on the merge
    assert mirror(stack, ledger, spec) == {**source.expected, 999: extra.to_pylist()[0]}
    lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).delete(EqualTo("id", 999))
    assert mirror(stack, ledger, spec) == source.expected
    files_now = len(lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).scan().plan_files())
    merged = [
        s.summary
        for s in snapshots(stack, ledger, spec)
        if s.summary.additional_properties.get("kafka-offsets.batch") == str(batch)
    ]
    assert sum(int(s.additional_properties.get("deleted-data-files", 0)) for s in merged) == 1 < files_now
    assert mirror(stack, ledger, spec) == source.expected
    # the file holding 105 rewritten by Spark, swapped in by the commit
    rewritten = [p for p in data_files(stack, ledger, spec) if f"/{batch_directory(batch)}/" in p]
    assert len(rewritten) == 1 and f"/{REWRITES_DIR}/" in rewritten[0]

    # batch 4: a maintenance job compacts the table after Spark ran, before the commit
    source.with_schema = False
    source.update(105, name="changed")
    source.delete(1)
    source.flush()
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    table = lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec)
    table.overwrite(table.scan().to_arrow(), snapshot_properties={"maintenance": "compaction"})  # same rows
    assert len(table.refresh().scan().plan_files()) == 1 < files_now
    commit(ledger, spec, outcome.plan.batch_id)
    assert mirror(stack, ledger, spec) == source.expected  # merged on the compacted state, not the stale one
    history = snapshots(stack, ledger, spec)
    compaction = [s for s in history if s.summary.additional_properties.get("maintenance") == "compaction"][-1]
    merged = [s for s in history if s.summary.additional_properties.get("kafka-offsets.batch") == str(batch + 1)]
    assert merged and merged[0].parent_snapshot_id == compaction.snapshot_id  # built on it, not beside it
    assert not [p for p in data_files(stack, ledger, spec) if f"/{REWRITES_DIR}/" in p]  # Spark's base was gone


def test_random_workload_equals_the_source_the_latest_batch_replays_older_ones_and_rewinds_are_refused(
    stack, ledger, make_topic, tmp_path
):
    """Many keys changed many times per batch (last change wins across 3 partitions), two batches."""
    topic = make_topic(partitions=3)
    spec = mirror_spec("mirror_random", topic, str(tmp_path / "lake"))
    source, _ = two_random_batches(stack, ledger, spec, 400)

    ctx = operation_context(ledger, stack, submitter(stack))
    with refused(MergeOperationRefusedError, r"only the latest batch \(2\) replays"):
        replay_batch(ctx, spec.name, 1)
    files_before = {
        t.file.file_path for t in lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).scan().plan_files()
    }
    replay_batch(ctx, spec.name, 2)  # merged again on the state batch 1 left: the same rows
    assert mirror(stack, ledger, spec) == source.expected
    replayed = lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec)
    assert {t.file.file_path for t in replayed.scan().plan_files()} != files_before  # rewritten, not left alone
    assert [c["kafka-offsets.operation"] for c in lake_readers.table_commits(stack.pg_url(), ledger.schema, spec)][
        -1
    ] == "replay"
    with refused(MergeOperationRefusedError, "only skip forward"):
        reset_offsets(operation_context(ledger, stack), spec.name, ResetRequest(ResetMode.TO_EARLIEST), dry_run=False)
    assert mirror(stack, ledger, spec) == source.expected


# What each format's refusal of a dropped and of a changed column says (both name the column).
SCHEMA_REFUSALS = {
    "iceberg": ("v would be dropped", "v would change from"),
    "delta": (re.escape("dropped: ['v']; changed: none"), re.escape("dropped: none; changed: ['v']")),
}


@pytest.mark.parametrize("sink_format", ["iceberg", "delta"])
def test_upsert_changes_and_the_mirror_schema_evolves_only_by_nullable_columns(
    stack, ledger, make_topic, tmp_path, sink_format
):
    """The same upserts and schema changes on an Iceberg and on a Delta mirror (a composite key)."""
    topic = make_topic(partitions=1)
    root = str(tmp_path / "lake")

    def upsert_spec(json_schema: str) -> PipelineSpec:
        return mirror_spec(
            "mirror_upsert", topic, root, sink_format, changes="upsert", merge_key="tenant,id", json_schema=json_schema
        )

    spec = upsert_spec("tenant STRING, id INT, v STRING")
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    events = [
        ({"tenant": "a", "id": 1}, {"tenant": "a", "id": 1, "v": "one"}),
        ({"tenant": "b", "id": 1}, {"tenant": "b", "id": 1, "v": "other tenant"}),
        ({"tenant": "a", "id": 2}, {"tenant": "a", "id": 2, "v": "two"}),
        ({"tenant": "a", "id": 1}, {"tenant": "a", "id": 1, "v": "one again"}),
        ({"tenant": "a", "id": 2}, None),  # tombstone
    ]
    for key, value in events:
        producer.produce(topic, key=json.dumps(key), value=None if value is None else json.dumps(value))
    assert producer.flush(30) == 0
    run_once(ledger, spec, stack)
    table = lake_readers.read_table(stack.pg_url(), ledger.schema, spec)
    got = sorted((r["tenant"], r["id"], r["v"], r["_kafka_offset"], r["_op"]) for r in table.to_pylist())
    assert got == [("a", 1, "one again", 3, "u"), ("b", 1, "other tenant", 1, "u")]

    wider = upsert_spec("tenant STRING, id INT, v STRING, added BIGINT")
    assert change_spec(operation_context(ledger, stack), spec.name, wider, dry_run=False).applied
    sink_of(ledger, wider).check_writable(wider.decode)  # as the next plan does
    assert lake_readers.read_table(stack.pg_url(), ledger.schema, wider).schema.names == [
        "tenant",
        "id",
        "v",
        "_kafka_partition",
        "_kafka_offset",
        "_source_position",
        "_source_ts_ms",
        "_op",
        "added",
    ]
    narrower_schemas = ("tenant STRING, id INT, added BIGINT", "tenant STRING, id INT, v BIGINT, added BIGINT")
    for dropped, message in zip(narrower_schemas, SCHEMA_REFUSALS[sink_format]):
        narrower = upsert_spec(dropped)
        with refused(SchemaEvolutionError, message):
            sink_of(ledger, narrower).check_writable(narrower.decode)
    # The schema commit of the next plan changes no row: the latest batch replays on the wider table.
    replay_batch(operation_context(ledger, stack, submitter(stack)), spec.name, 1)
    if sink_format == "delta":
        assert lake_readers.delta_table(wider).history(1)[0]["kafka-offsets.operation"] == "replay"
    else:
        commits = lake_readers.table_commits(stack.pg_url(), ledger.schema, wider)
        assert commits[-1]["kafka-offsets.operation"] == "replay"
    again = lake_readers.read_table(stack.pg_url(), ledger.schema, wider).to_pylist()
    assert sorted((r["tenant"], r["id"], r["v"], r["_kafka_offset"], r["added"]) for r in again) == [
        ("a", 1, "one again", 3, None),
        ("b", 1, "other tenant", 1, None),
    ]
    producer.produce(
        topic,
        key=json.dumps({"tenant": "b", "id": 1}),
        value=json.dumps({"tenant": "b", "id": 1, "v": "w", "added": 7}),
    )
    assert producer.flush(30) == 0
    run_once(ledger, wider, stack)
    rows = {
        (r["tenant"], r["id"]): r for r in lake_readers.read_table(stack.pg_url(), ledger.schema, wider).to_pylist()
    }
    assert (rows[("b", 1)]["v"], rows[("b", 1)]["added"]) == ("w", 7)
    assert (rows[("a", 1)]["v"], rows[("a", 1)]["added"]) == ("one again", None)


def test_avro_upserts_keyed_by_strings_or_avro_mirror_each_keys_last_value_and_an_unknown_avro_key_fails_the_batch(
    stack, ledger, make_topic, tmp_path
):
    """Avro values through the stack's schema registry (the reader schema is the row), record keys as a plain
    string, as a JSON scalar and in Avro's wire format (a primitive key, and a record key under a subject of its
    own): each tombstone deletes its row. A tombstone whose Avro key schema the registry lacks fails the batch,
    changing nothing."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, record_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from airflow_kafka_offsets.core.spec import build_spec
    from airflow_kafka_offsets.errors import SparkJobError

    topic = make_topic(partitions=1)
    client = SchemaRegistryClient(stack.schema_registry_client_config())
    row = {
        "type": "record",
        "name": "Row",
        "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}],
    }
    client.register_schema(f"{topic}-value", Schema(json.dumps(row), "AVRO"))
    client.register_schema(f"{topic}-key", Schema('"int"', "AVRO"))
    values = AvroSerializer(client, json.dumps(row), conf={"auto.register.schemas": False})
    keys = AvroSerializer(client, '"int"', conf={"auto.register.schemas": False})
    value_of = SerializationContext(topic, MessageField.VALUE)
    spec = build_spec(
        "avro_upserts",
        [topic],
        str(tmp_path / "lake"),
        value_format={"type": "avro"},
        sink={"format": "iceberg", "table": "lake.avro_upserts", "merge_key": "id", "changes": "upsert"},
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    events: list[tuple[bytes, dict | None]] = [
        (b"1", {"id": 1, "name": "one"}),
        (b"2", {"id": 2, "name": "two"}),
        (b'"3"', {"id": 3, "name": "three"}),  # a JSON string, as Kafka Connect's JsonConverter writes one
        (b"1", {"id": 1, "name": "one again"}),
        (b"2", None),  # a plain string key's tombstone
        (b'"3"', None),
        (b"4", {"id": 4, "name": "four"}),
    ]
    for key, value in events:
        producer.produce(topic, key=key, value=None if value is None else values(value, value_of))
    assert producer.flush(30) == 0
    assert run_once(ledger, spec, stack).records == 7
    landed = sorted((r["id"], r["name"], r["_kafka_offset"], r["_op"]) for r in mirror(stack, ledger, spec).values())
    assert landed == [(1, "one again", 3, "u"), (4, "four", 6, "u")]

    key_of = SerializationContext(topic, MessageField.KEY)
    record_key = {"type": "record", "name": "RowKey", "fields": [{"name": "id", "type": "int"}]}
    record_keys = AvroSerializer(
        client, json.dumps(record_key), conf={"subject.name.strategy": record_subject_name_strategy}
    )
    producer.produce(topic, key=b"5", value=None)  # a tombstone of a key the mirror never held
    producer.produce(topic, key=keys(6, key_of), value=values({"id": 6, "name": "six"}, value_of))
    producer.produce(topic, key=keys(4, key_of), value=None)  # a primitive Avro key
    producer.produce(topic, key=record_keys({"id": 1}, key_of), value=None)  # a record Avro key
    assert producer.flush(30) == 0
    assert run_once(ledger, spec, stack).records == 4
    landed = sorted((r["id"], r["name"], r["_kafka_offset"]) for r in mirror(stack, ledger, spec).values())
    assert landed == [(6, "six", 8)]

    unknown_schema = bytes([0]) + (999_999).to_bytes(4, "big") + b"\x02"  # the wire format, an id never registered
    producer.produce(topic, key=unknown_schema, value=None)
    assert producer.flush(30) == 0
    outcome = plan(ledger, spec, stack)
    with pytest.raises(
        SparkJobError, match=r"1 change events have no value for a key column \(id\).*id\(s\) \[999999\]"
    ):
        read(ledger, spec, stack, outcome)
    assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
    assert ledger.cursors(spec.name) == {TP(topic, 0): 11}
    assert sorted(mirror(stack, ledger, spec)) == [6]
