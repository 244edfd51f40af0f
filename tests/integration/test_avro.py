"""Avro values through the stack's schema registry (Apicurio's Confluent-compatible API), end to end.

Producers are confluent-kafka's AvroSerializer with a SchemaRegistryClient: a subject with three
writer versions (each adds a field with a default), plus records no serializer would write (a wrong
magic byte, an unknown schema id, a truncated payload). Every sink gets one batch: every record once
at its offset, the decoded fields typed in the reader's shape (older records with the defaults), every
corrupted record kept with its offset and why, counted per partition in the ledger. A replay after
the subject gained a fourth version decodes as the commit did; a reader schema that changes a field
is refused before anything runs; bad options are refused with the ledger untouched.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from airflow_kafka_offsets.core.model import PipelineSpec
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import InvalidPipelineSpecError, SchemaEvolutionError
from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.replay import replay_batch
from faults_harness import lake_readers

from . import pipeline
from .helpers import local_path, range_bytes, refused
from .pipeline import ACTOR, plan, run_once, submitter
from .test_spark_lines import LINES

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

BASE = [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]
ADDED = [
    {"name": "currency", "type": ["null", "string"], "default": None},
    {"name": "channel", "type": "string", "default": "web"},
    {"name": "region", "type": "string", "default": "eu"},  # the 4th version's
]


def order_schema(extra: int) -> dict[str, Any]:
    return {"type": "record", "name": "Order", "namespace": "ako.test", "fields": [*BASE, *ADDED[:extra]]}


VERSIONS = [order_schema(n) for n in range(3)]
# What the reader (version 3) makes of each writer version's fields it lacks.
DEFAULTS = {"currency": None, "channel": "web"}
UNKNOWN_ID = 2_000_000_000
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}  # a JSON Schema, not Avro


class AvroTopic:
    """A topic whose values are Avro records of the subject ``<topic>-value``, written by confluent-kafka's
    serializer, and a few records no serializer would write; ``expected`` is what each offset should hold."""

    def __init__(self, stack, topic: str, partitions: int) -> None:
        self.stack = stack
        self.topic = topic
        self.subject = f"{topic}-value"
        self.partitions = partitions
        self.client = SchemaRegistryClient({**stack.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S})
        self.client.set_compatibility(subject_name=self.subject, level="BACKWARD")
        self.ids = [self.register(v) for v in VERSIONS]
        self.producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "enable.idempotence": True})
        self.expected: dict[tuple[int, int], dict[str, Any]] = {}  # (partition, offset) -> row
        self.next_id = 1

    def register(self, schema: dict[str, Any]) -> int:
        return int(self.client.register_schema(self.subject, Schema(json.dumps(schema), "AVRO")))

    def _send(self, partition: int, key: bytes, value: bytes | None, expected: dict[str, Any]) -> None:
        def delivered(err, msg):
            assert err is None, err
            self.expected[(msg.partition(), msg.offset())] = {"key": key, "value": value, **expected}

        self.producer.produce(self.topic, key=key, value=value, partition=partition, on_delivery=delivered)

    def produce_records(self, version: int, count: int) -> None:
        """``count`` records of writer ``version`` (1-based), round-robin over the partitions."""
        schema = order_schema(version - 1) if version <= 3 else order_schema(3)
        serializer = AvroSerializer(self.client, json.dumps(schema), conf={"auto.register.schemas": False})
        context = SerializationContext(self.topic, MessageField.VALUE)
        for _ in range(count):
            record: dict[str, Any] = {"id": self.next_id, "amount": self.next_id + 0.25}
            if version >= 2:
                record["currency"] = "EUR" if self.next_id % 2 else None
            if version >= 3:
                record["channel"] = f"app-{self.next_id}"
            if version >= 4:
                record["region"] = "us"
            key = f"order-{uuid.uuid4().hex[:8]}-{self.next_id}".encode()
            reader_view = {**DEFAULTS, **{k: v for k, v in record.items() if k != "region"}}
            self._send(self.next_id % self.partitions, key, serializer(record, context), {"decoded": reader_view})
            self.next_id += 1
        assert self.producer.flush(30) == 0

    def produce_corrupted(self) -> None:
        """Per partition: a wrong magic byte, an unknown schema id, a truncated payload, and a tombstone."""
        good = AvroSerializer(self.client, json.dumps(VERSIONS[0]), conf={"auto.register.schemas": False})(
            {"id": 0, "amount": 0.5}, SerializationContext(self.topic, MessageField.VALUE)
        )
        for partition in range(self.partitions):
            cases = [
                (b"\x01" + good[1:], "unknown magic byte 0x01 (the Confluent wire format starts with 0x00)"),
                (
                    b"\x00" + UNKNOWN_ID.to_bytes(4, "big") + good[5:],
                    f"unknown schema id {UNKNOWN_ID} (the schema registry does not have it)",
                ),
                (good[:6], f"payload does not decode with writer schema id {self.ids[0]} into the reader schema"),
                (None, None),  # a tombstone: nothing to decode, not an error
            ]
            for index, (value, error) in enumerate(cases):
                self._send(partition, f"bad-{partition}-{index}".encode(), value, {"decoded": None, "error": error})
        assert self.producer.flush(30) == 0

    def bad_per_partition(self) -> dict[int, int]:
        counts: Counter[int] = Counter()
        for (partition, _), row in self.expected.items():
            counts[partition] += 1 if row.get("error") else 0
        return dict(counts)


def avro_spec(name: str, topic: str, root: str, sink_format: str = "directory", **value_format: Any) -> PipelineSpec:
    sink = None
    if sink_format != "directory":
        sink = {"format": sink_format, "table": f"lake.{name}" if sink_format == "iceberg" else name}
    return build_spec(name, [topic], root, sink=sink, value_format={"type": "avro", **value_format})


def output_rows(stack, ledger: Ledger, spec: PipelineSpec, batch_id: int | None = None) -> list[dict[str, Any]]:
    """The committed records as a reader of the sink sees them (a table, or the batch directories)."""
    if spec.sink.format.value != "directory":
        return lake_readers.read_table(stack.pg_url(), ledger.schema, spec).to_pylist()
    rows: list[dict[str, Any]] = []
    for record in ledger.committed_batches(spec.name):
        if batch_id is None or record.plan.batch_id == batch_id:
            rows += pq.read_table(local_path(record.plan.output_uri)).to_pylist()
    return rows


def assert_every_record_once(rows: list[dict[str, Any]], source: AvroTopic) -> None:
    seen = Counter((r["partition"], r["offset"]) for r in rows)
    assert not [k for k, n in seen.items() if n > 1], "a record appears twice"
    assert set(seen) == set(source.expected), "records lost or unexpected"
    for row in rows:
        want = source.expected[(row["partition"], row["offset"])]
        assert (row["key"], row["value"]) == (want["key"], want["value"])
        assert row["decode_error"] == want.get("error"), (row["offset"], row["decode_error"])
        assert row["decoded"] == want["decoded"], (row["offset"], row["decoded"])


def decode_errors_in_ledger(ledger: Ledger, pipeline: str, batch_id: int) -> dict[int, int]:
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT partition, decode_errors FROM {s}.batch_ranges WHERE pipeline = %s AND batch_id = %s",
            (pipeline, batch_id),
        )
    return {int(p): int(n) for p, n in rows}


def decoded_type(table: pa.Schema) -> dict[str, pa.DataType]:
    return {f.name: f.type for f in table.field("decoded").type}


@pytest.mark.parametrize("sink_format", ["directory", "iceberg", "delta"])
def test_three_writer_versions_and_corrupted_records_land_once_typed_in_every_sink(
    stack, ledger, make_topic, tmp_path, sink_format
):
    topic = make_topic(partitions=2, prefix="avro")
    source = AvroTopic(stack, topic, partitions=2)
    for version in (1, 2, 3):
        source.produce_records(version, 6)
    source.produce_corrupted()
    spec = avro_spec(f"avro_{sink_format}", topic, str(tmp_path / "lake"), sink_format)

    outcome = run_once(ledger, spec, stack)
    assert outcome is not None and outcome.records == len(source.expected) == 18 + 8

    rows = output_rows(stack, ledger, spec)
    assert_every_record_once(rows, source)
    assert decode_errors_in_ledger(ledger, spec.name, 1) == source.bad_per_partition() == {0: 3, 1: 3}
    with ledger.transaction() as tx:
        recorded = tx.batch_decode(spec.name, 1)
    assert recorded is not None and recorded.reader is not None
    assert (recorded.reader.subject, recorded.reader.version, recorded.reader.schema_id) == (
        source.subject,
        3,
        source.ids[2],
    )
    # The reader's columns, typed, in the output the sink's readers see.
    if sink_format == "directory":
        schema = pq.read_schema(next(local_path(outcome.plan.output_uri).glob("*.parquet")))
        errors = pq.read_table(local_path(outcome.plan.output_uri) / "_errors").to_pylist()
        assert sorted((e["partition"], e["offset"], e["decode_error"]) for e in errors) == sorted(
            (p, o, row["error"]) for (p, o), row in source.expected.items() if row.get("error")
        )
    else:
        schema = lake_readers.read_table(stack.pg_url(), ledger.schema, spec).schema
    types = decoded_type(schema)
    assert list(types) == ["id", "amount", "currency", "channel"]
    assert pa.types.is_int64(types["id"]) and pa.types.is_float64(types["amount"])
    assert all(pa.types.is_string(t) or pa.types.is_large_string(t) for t in (types["currency"], types["channel"]))


def test_a_writer_schema_of_another_subject_is_met_in_the_write_and_lands_typed_once_unknown_ids_stay_errors(
    stack, ledger, make_topic, tmp_path, monkeypatch
):
    """The app decodes with the reader subject's versions, fetched before the read. A record whose writer
    schema was registered elsewhere (another subject: never among them) is met during the write, its id fetched,
    and the batch written once more: it lands typed, once, as if its id had been known up front; so does a
    replay. An id the registry does not have stays in the errors output with its offset; a JSON schema's id is
    named as such."""
    from airflow_kafka_offsets.spark_apps import kafka_range_batch as app

    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(1, 2)
    elsewhere = f"{topic}-elsewhere"
    # the same record with one more field, which the reader (version 3) does not have
    wider = {**order_schema(2), "fields": [*order_schema(2)["fields"], {"name": "origin", "type": "string"}]}
    wider_id = int(source.client.register_schema(elsewhere, Schema(json.dumps(wider), "AVRO")))
    json_id = int(source.client.register_schema(f"{topic}-json", Schema(json.dumps(JSON_SCHEMA), "JSON")))
    assert wider_id not in source.ids and json_id not in source.ids
    serializer = AvroSerializer(
        source.client,
        json.dumps(wider),
        conf={"auto.register.schemas": False, "subject.name.strategy": lambda ctx, record_name: elsewhere},
    )
    context = SerializationContext(topic, MessageField.VALUE)
    for n in (101, 102):
        value = serializer({"id": n, "amount": 1.5, "currency": "CHF", "origin": "pos"}, context)
        want = {"id": n, "amount": 1.5, "currency": "CHF", "channel": "web"}
        source._send(0, f"elsewhere-{n}".encode(), value, {"decoded": want})
    not_avro = f"schema id {json_id} is a JSON schema, not Avro"
    source._send(0, b"json", b"\x00" + json_id.to_bytes(4, "big") + b"{}", {"decoded": None, "error": not_avro})
    source.produce_corrupted()  # among them an id the registry does not have
    source.produce_records(3, 2)
    writes: list[str] = []
    write_staged = app.write_staged

    def counted(records, job):
        writes.append(job["staging_uri"])
        return write_staged(records, job)

    monkeypatch.setattr(app, "write_staged", counted)
    spec = avro_spec("avro_elsewhere", topic, str(tmp_path))
    outcome = run_once(ledger, spec, stack)
    assert outcome is not None and outcome.records == len(source.expected) == 2 + 2 + 1 + 4 + 2
    assert len(writes) == 2  # the first write met the two ids; the registry knows them: written again
    rows = output_rows(stack, ledger, spec)
    assert_every_record_once(rows, source)
    errors = pq.read_table(local_path(outcome.plan.output_uri) / "_errors").to_pylist()
    assert sorted((e["offset"], e["decode_error"]) for e in errors) == sorted(
        (o, row["error"]) for (_, o), row in source.expected.items() if row.get("error")
    )
    assert f"unknown schema id {UNKNOWN_ID} (the schema registry does not have it)" in {
        e["decode_error"] for e in errors
    }
    assert decode_errors_in_ledger(ledger, spec.name, 1) == {0: 4}

    replay_batch(pipeline.operation_context(ledger, stack, submitter(stack)), spec.name, 1)
    assert output_rows(stack, ledger, spec, 1) == rows

    writes.clear()
    source.produce_records(2, 2)  # the subject's own versions only: known before the read, written once
    assert run_once(ledger, spec, stack).records == 2 and len(writes) == 1


# How the ledger's key + value bytes are counted when the written values are not all there: observed while
# writing (any batch of at most OBSERVED_RANGES_MAX ranges), or summed over a second Kafka read for a batch
# of more ranges. The app's constant, lowered for a small topic (Spark Connect: the app runs in this process).
COUNTING = {"observed": {}, "summed-from-the-read": {"OBSERVED_RANGES_MAX": 1}}


@pytest.mark.parametrize(
    ("sink_format", "counting", "mode"),
    [
        ("directory", "observed", "spark-connect"),
        ("directory", "summed-from-the-read", "spark-connect"),
        # spark-submit's Avro path runs in test_spark_submit_adds_spark_avro_by_packages...
        pytest.param("directory", "observed", "spark-submit", marks=pytest.mark.long),
        ("iceberg", "observed", "spark-connect"),
        ("delta", "observed", "spark-connect"),
    ],
)
def test_keep_raw_value_false_writes_values_only_where_they_did_not_decode_and_counts_the_bytes_read(
    stack, ledger, make_topic, tmp_path, monkeypatch, sink_format, counting, mode
):
    from airflow_kafka_offsets.spark_apps import kafka_batch_check as check

    for name, value in COUNTING[counting].items():
        monkeypatch.setattr(check, name, value)
    topic = make_topic(partitions=2, prefix="avro")
    source = AvroTopic(stack, topic, partitions=2)
    for version in (1, 2, 3):
        source.produce_records(version, 5)
    source.produce_corrupted()
    name = f"avro_lean_{sink_format}_{counting.replace('-', '_')}_{mode[6:]}"
    sink = None if sink_format == "directory" else {"format": sink_format, "table": f"lake.{name}"}
    if sink_format == "delta":
        sink = {"format": "delta", "table": name}
    spec = build_spec(
        name, [topic], str(tmp_path / "lake"), sink=sink, value_format={"type": "avro"}, keep_raw_value="false"
    )
    assert spec.decode is not None and spec.decode.to_json()["keep_raw_value"] is False

    outcome = run_once(ledger, spec, stack, "spark_default" if mode == "spark-submit" else None)
    assert outcome is not None and outcome.records == len(source.expected) == 15 + 8

    rows = output_rows(stack, ledger, spec)
    assert sorted((r["partition"], r["offset"]) for r in rows) == sorted(source.expected)
    for row in rows:
        want = source.expected[(row["partition"], row["offset"])]
        assert (row["key"], row["decoded"], row["decode_error"]) == (want["key"], want["decoded"], want.get("error"))
        # the raw value only where the record did not decode (a tombstone's is null anyway)
        assert row["value"] == (want["value"] if want.get("error") else None), row["offset"]
    # the ledger's bytes are the bytes read from Kafka, not the written values'
    read_bytes: Counter[int] = Counter()
    for (partition, _), want in source.expected.items():
        read_bytes[partition] += len(want["key"]) + len(want["value"] or b"")
    assert range_bytes(ledger, spec.name) == [
        (p, sum(1 for q, _ in source.expected if q == p), read_bytes[p]) for p in range(2)
    ]
    assert decode_errors_in_ledger(ledger, spec.name, 1) == {0: 3, 1: 3}
    with ledger.transaction() as tx:
        recorded = tx.batch_decode(spec.name, 1)
    assert recorded is not None and recorded.keep_raw_value is False  # a replay writes what the commit wrote
    if sink_format == "directory":
        errors = pq.read_table(local_path(outcome.plan.output_uri) / "_errors").to_pylist()
        assert sorted((e["partition"], e["offset"], e["value"]) for e in errors) == sorted(
            (p, o, row["value"]) for (p, o), row in source.expected.items() if row.get("error")
        )


def test_a_replay_after_a_fourth_version_decodes_as_the_commit_did_and_the_next_batch_takes_it(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(1, 3)
    source.produce_records(3, 3)
    spec = avro_spec("avro_replay", topic, str(tmp_path))
    assert run_once(ledger, spec, stack).records == 6
    first = output_rows(stack, ledger, spec, 1)

    fourth = source.register(order_schema(3))  # adds region (default "eu")
    replay_batch(pipeline.operation_context(ledger, stack, submitter(stack)), spec.name, 1)
    replayed = output_rows(stack, ledger, spec, 1)
    assert replayed == first  # the recorded reader schema (version 3): no region, the same values
    assert "region" not in replayed[0]["decoded"]
    assert_every_record_once(replayed, source)

    # The next batch is planned with the subject's latest: version 4, older writers get its default.
    before = dict(source.expected)
    source.produce_records(4, 2)
    assert run_once(ledger, spec, stack).records == 2
    with ledger.transaction() as tx:
        versions = [tx.batch_decode(spec.name, b).reader.version for b in (1, 2)]  # type: ignore[union-attr]
        second = tx.batch_decode(spec.name, 2)
    assert versions == [3, 4] and second is not None and second.reader is not None
    assert second.reader.schema_id == fourth
    new_rows = output_rows(stack, ledger, spec, 2)
    assert sorted(r["decoded"]["region"] for r in new_rows) == ["us", "us"]
    assert {(r["partition"], r["offset"]) for r in new_rows} == set(source.expected) - set(before)


@pytest.mark.parametrize("sink_format", ["iceberg", "delta"])
def test_a_reader_schema_that_adds_a_field_evolves_the_table_anything_else_is_refused_naming_both(
    stack, ledger, make_topic, tmp_path, sink_format
):
    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(3, 2)
    spec = avro_spec(f"avro_evolve_{sink_format}", topic, str(tmp_path / "lake"), sink_format)
    assert run_once(ledger, spec, stack).records == 2

    fourth = source.register(order_schema(3))  # version 4 adds region: the table gains decoded.region
    source.produce_records(4, 2)
    assert run_once(ledger, spec, stack).records == 2
    table = lake_readers.read_table(stack.pg_url(), ledger.schema, spec)
    assert list(decoded_type(table.schema)) == ["id", "amount", "currency", "channel", "region"]
    regions = sorted((r["decoded"]["id"], r["decoded"]["region"]) for r in table.to_pylist())
    assert regions == [(1, None), (2, None), (3, "us"), (4, "us")]  # rows written before the column: null

    # Version 5 changes a field's type: refused before anything is planned, both reader schemas named.
    source.client.set_compatibility(subject_name=source.subject, level="NONE")
    changed = order_schema(3)
    changed["fields"] = [{**f, "type": "string"} if f["name"] == "amount" else f for f in changed["fields"]]
    fifth = source.register(changed)
    source.produce_records(4, 1)
    with refused(SchemaEvolutionError) as caught:
        plan(ledger, spec, stack)
    message = str(caught.value)
    assert f"the reader schema changed from subject {source.subject!r} version 4 (schema id {fourth})" in message
    assert f"to subject {source.subject!r} version 5 (schema id {fifth})" in message
    assert "amount" in message
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT batch_id, state FROM {s}.batches WHERE pipeline = %s ORDER BY 1", (spec.name,)) == [
            (1, "committed"),
            (2, "committed"),
        ]


def test_bad_value_formats_are_refused_and_the_ledger_stays_untouched(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    root = str(tmp_path)
    with pytest.raises(InvalidPipelineSpecError, match="json_schema and value_format exclude each other"):
        build_spec("bad", [topic], root, json_schema="id STRING", value_format={"type": "avro"})
    with pytest.raises(InvalidPipelineSpecError, match=r"value_format.type 'protobuf'.*spark-protobuf_2.13:4.2.0"):
        build_spec("bad", [topic], root, value_format={"type": "protobuf"})
    with pytest.raises(InvalidPipelineSpecError, match=r"value_format.version must be 'latest' or a version"):
        build_spec("bad", [topic], root, value_format={"type": "avro", "version": 0})

    # Refused at plan time, by the registry's answer: nothing reaches the ledger.
    plain = f"{topic}-plain"
    SchemaRegistryClient({**stack.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S}).register_schema(
        plain, Schema(json.dumps({"type": "string"}), "AVRO")
    )
    cases = [
        ({"subject": f"{topic}-missing"}, r"the schema registry .* has no such subject"),
        ({"version": 9}, r"the schema registry .* has no version 9 of it"),
        ({"subject": plain}, r"must be an Avro record"),
    ]
    for options, match in cases:
        spec = avro_spec("bad_avro", topic, root, **options)
        with refused(InvalidPipelineSpecError, match):
            plan(ledger, spec, stack)
    with ledger.transaction() as tx:
        assert tx.fetchone("SELECT count(*) FROM {s}.pipelines")[0] == 0
        assert tx.fetchone("SELECT count(*) FROM {s}.batches")[0] == 0
    assert source.ids  # the subject itself is fine: the refusals were the options'


def test_spark_submit_adds_spark_avro_by_packages_and_fetches_writer_schemas_from_the_job_file(
    stack, ledger, make_topic, tmp_path, caplog, capfd
):
    """spark-submit, not Spark Connect: the configured jars hold only the Kafka connector, so the package
    adds spark-avro for the batch's Spark with --packages; the registry's password reaches the app in the
    private job file, never on the command line."""
    caplog.set_level(logging.INFO)
    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(2, 3)
    source.produce_corrupted()
    spec = avro_spec("avro_submit", topic, str(tmp_path))
    outcome = plan(ledger, spec, stack)
    kafka_only = tuple(j for j in stack.connector_jars if "spark-avro" not in j)
    runner = submitter(stack, "spark_default", spec.output_root, jars=kafka_only)
    report = pipeline.run_batch(
        ledger,
        pipeline.sink_of(ledger, spec),
        outcome.plan,
        runner,
        {"bootstrap.servers": stack.bootstrap_servers},
        ACTOR,
    )
    assert report is not None and report.records == 7
    pipeline.commit(ledger, spec, 1)
    assert_every_record_once(output_rows(stack, ledger, spec), source)
    captured = capfd.readouterr()
    log_text = captured.out + captured.err + caplog.text
    submit_lines = [line for line in log_text.splitlines() if "Spark-Submit cmd" in line]
    assert submit_lines and all("--packages org.apache.spark:spark-avro_2.13:" in line for line in submit_lines)
    assert stack.schema_registry_password not in log_text


def test_catch_up_plans_each_avro_batch_with_its_reader_schema(stack, ledger, make_topic, tmp_path):
    from airflow_kafka_offsets.service.operations.catch_up import catch_up

    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(1, 3)
    source.produce_records(3, 3)
    spec = build_spec("avro_catch_up", [topic], str(tmp_path), value_format={"type": "avro"}, max_records_per_batch=4)
    plan(ledger, spec, stack)  # the pipeline's first batch, as its DAG would plan it
    outcome = catch_up(pipeline.operation_context(ledger, stack, submitter(stack)), spec.name, 5)
    assert (outcome.batches, outcome.records) == (2, 6)
    assert_every_record_once(output_rows(stack, ledger, spec), source)
    with ledger.transaction() as tx:
        assert [tx.batch_decode(spec.name, b).reader.version for b in (1, 2)] == [3, 3]  # type: ignore[union-attr]


def test_the_operators_take_the_registry_from_its_airflow_connection(stack, ledger, schema, make_topic, tmp_path):
    """The plan, read and commit operators as a DAG runs them: the reader schema through the stack's
    schema_registry_default connection (SchemaRegistryHook), the writer schemas through the access the
    read step hands Spark from the same connection."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_kafka_offsets.operators import (
        KafkaBatchCommitOperator,
        KafkaBatchPlanOperator,
        KafkaBatchSparkOperator,
    )

    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(2, 2)
    source.produce_records(3, 2)
    source.produce_corrupted()
    common = {"pipeline": "avro_ops", "ledger_schema": schema}
    context = {
        "ti": SimpleNamespace(dag_id="d", run_id="r", task_id="t", try_number=1, map_index=-1),
        "outlet_events": OutletEventAccessors(),
    }
    planned = KafkaBatchPlanOperator(
        task_id="plan", topics=[topic], output_root=str(tmp_path), value_format={"type": "avro"}, **common
    ).execute(context)
    assert planned["batch_id"] == 1 and planned["records_planned"] == 8
    read = KafkaBatchSparkOperator(task_id="read", spark_conn_id="spark_connect_default", **common).execute(context)
    assert read["records_read"] == 8
    KafkaBatchCommitOperator(task_id="commit", **common).execute(context)
    spec = avro_spec("avro_ops", topic, str(tmp_path))
    assert_every_record_once(output_rows(stack, ledger, spec), source)
    assert decode_errors_in_ledger(ledger, "avro_ops", 1) == {0: 3}


# AKO_SPARK_LINES, as test_spark_lines.py; CI runs the oldest line, the others with the long tests
@pytest.mark.parametrize(
    "line", [line if line == "3.5" else pytest.param(line, marks=pytest.mark.long) for line in LINES]
)
def test_avro_batches_run_on_other_spark_lines_with_that_lines_spark_avro(
    stack, ledger, make_topic, tmp_path, monkeypatch, line
):
    """spark-submit of the line's Spark first on PATH (as on a worker that is that cluster's client), with the
    line's Kafka connector and spark-avro (Scala 2.12 for 3.5): the app's Avro path runs there unchanged."""
    import sys
    from pathlib import Path

    from devstack import jars, spark_lines

    version = spark_lines.resolve(line)
    home = spark_lines.spark_home(version)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    line_jars = tuple(str(j) for j in (*jars.fetch_connector(version), *jars.fetch_avro(version)))
    topic = make_topic(partitions=1, prefix="avro")
    source = AvroTopic(stack, topic, partitions=1)
    source.produce_records(1, 2)
    source.produce_records(3, 2)
    source.produce_corrupted()
    spec = avro_spec(f"avro_line_{line.replace('.', '_')}", topic, str(tmp_path))
    outcome = plan(ledger, spec, stack)
    runner = submitter(stack, "spark_default", jars=line_jars)
    report = pipeline.run_batch(
        ledger,
        pipeline.sink_of(ledger, spec),
        outcome.plan,
        runner,
        {"bootstrap.servers": stack.bootstrap_servers},
        ACTOR,
    )
    assert report is not None and report.spark_version == version and report.records == 8
    pipeline.commit(ledger, spec, 1)
    assert_every_record_once(output_rows(stack, ledger, spec), source)
