"""Debezium's Avro envelopes (core/debezium.py): the mirror's row read from the reader schema Debezium's
converter registers, the refusals of envelopes the merge cannot read, and what the spec, the job and the
table are given for an Avro Debezium pipeline."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_offsets.core.avro import reader_columns
from airflow_kafka_offsets.core.ddl import parse_ddl, render_ddl
from airflow_kafka_offsets.core.debezium import EnvelopeError, envelope_row_ddl
from airflow_kafka_offsets.core.merge import MIRROR_COLUMNS, ChangeFormat, MergeSpec, check_row, row_ddl
from airflow_kafka_offsets.core.model import AvroReader, BatchPlan, PartitionRange
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.service.jobs import build_job
from airflow_kafka_offsets.sinks.schema import mirror_schema

NULLABLE_LONG = {"type": ["null", "long"], "default": None}
# The value schema Apicurio's converter registers for Debezium 3.6's PostgreSQL connector (a table
# id INT PRIMARY KEY, name TEXT, qty BIGINT), as the stack's registry served it (source fields trimmed).
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "cdcavro.public.src",
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {"name": "id", "type": "int"},
                        {"name": "name", "type": ["null", "string"], "default": None},
                        {"name": "qty", **NULLABLE_LONG},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.postgresql",
                "fields": [
                    {"name": "version", "type": "string"},
                    {"name": "ts_ms", "type": "long"},
                    {
                        "name": "snapshot",
                        "type": [{"type": "string", "connect.name": "io.debezium.data.Enum"}, "null"],
                        "default": "false",
                    },
                    {"name": "lsn", **NULLABLE_LONG},
                ],
            },
        },
        {
            "name": "transaction",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "block",
                    "namespace": "event",
                    "fields": [{"name": "id", "type": "string"}, {"name": "total_order", "type": "long"}],
                },
            ],
            "default": None,
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", **NULLABLE_LONG},
    ],
}
ROW = "`id` INT, `name` STRING, `qty` BIGINT"


def envelope_columns(**changes: object) -> str:
    """The decoded columns of the envelope with some fields replaced (None: removed)."""
    fields = [
        {**f, "type": changes[f["name"]]} if f["name"] in changes else f
        for f in ENVELOPE["fields"]
        if changes.get(f["name"], ...) is not None
    ]
    return reader_columns(json.dumps({**ENVELOPE, "fields": fields}))


def test_the_row_of_an_avro_envelope_is_its_after_record():
    assert envelope_row_ddl(envelope_columns()) == ROW
    assert row_ddl(envelope_columns(), ChangeFormat.DEBEZIUM, avro=True) == ROW
    assert row_ddl("id INT", ChangeFormat.DEBEZIUM, avro=False) == "id INT"  # JSON: the json_schema is the row


def test_an_envelope_without_before_or_source_still_has_a_row():
    value = ENVELOPE["fields"][0]["type"]
    assert envelope_row_ddl(envelope_columns(before=None, after=value, source=None)) == ROW


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"op": None}, "not a Debezium envelope: it has no op field"),
        ({"after": None, "op": None}, "it has no op and no after field"),
        ({"op": "int"}, "op is a int32, not a string"),
        ({"after": ["null", "long"]}, "after is a int64, not a record"),
        (
            {"after": ["null", {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "long"}]}]},
            "before and after are different records",
        ),
        ({"source": "string"}, "source is a string, not a record"),
    ],
)
def test_envelopes_the_merge_cannot_read_are_refused_naming_the_field(changes, message):
    with pytest.raises(EnvelopeError, match=message):
        envelope_row_ddl(envelope_columns(**changes))


def test_a_plain_record_is_not_an_envelope():
    with pytest.raises(EnvelopeError, match="give value_format the subject of Debezium's value schema"):
        envelope_row_ddl("id INT, name STRING")


def test_rendered_ddl_reads_back_to_the_same_columns():
    text = "a INT, b DECIMAL(12, 3), `c d` ARRAY<MAP<STRING, STRUCT<x: BIGINT, y: TIMESTAMP_NTZ>>>, e BINARY"
    assert parse_ddl(render_ddl(parse_ddl(text))) == parse_ddl(text)


def test_the_key_and_reserved_columns_are_checked_in_the_reader_schemas_row():
    check_row("p", ("id",), ROW, "the reader schema s v1")
    with pytest.raises(InvalidPipelineSpecError, match=r"merge_key column\(s\) nope are not in the reader schema"):
        check_row("p", ("nope",), ROW, "the reader schema s v1")
    with pytest.raises(InvalidPipelineSpecError, match="_op are the mirror's own columns"):
        check_row("p", ("id",), "id INT, _op STRING", "the reader schema s v1")


def avro_spec(changes: str = "debezium"):
    sink = {"format": "iceberg", "table": "m.t", "merge_key": "id", "changes": changes}
    return build_spec("p", ["cdcavro.public.t"], "/tmp/lake", sink=sink, value_format={"type": "avro"})


def test_an_avro_debezium_mirror_is_a_spec_whose_changes_must_all_decode():
    spec = avro_spec()
    assert spec.sink.merge == MergeSpec(("id",), ChangeFormat.DEBEZIUM)
    assert spec.decode is not None and spec.decode.avro is not None and spec.decode.max_errors == 0


def test_an_avro_upsert_mirror_takes_its_row_from_the_reader_schema_itself():
    spec = avro_spec("upsert")
    assert spec.sink.merge == MergeSpec(("id",), ChangeFormat.UPSERT)
    assert spec.decode is not None and spec.decode.avro is not None and spec.decode.max_errors == 0
    assert row_ddl("id INT, name STRING", ChangeFormat.UPSERT, avro=True) == "id INT, name STRING"


def test_an_avro_debezium_job_decodes_with_the_reader_envelope_and_the_table_holds_its_row():
    from dataclasses import replace

    spec = avro_spec()
    assert spec.decode is not None and spec.sink.merge is not None
    columns = envelope_columns()
    decode = replace(spec.decode, schema=columns, reader=AvroReader("s", 1, 9, json.dumps(ENVELOPE)))
    plan = BatchPlan("p", 1, 0, (PartitionRange("cdcavro.public.t", 0, 0, 5, 0),), "/x")
    job = build_job(plan, "a1", "/stage", {}, decode=decode, sink=spec.sink)
    assert job["decode"]["schema"] == columns  # not wrapped again: the reader schema is the envelope
    assert job["merge"] == {"key": ["id"], "changes": "debezium"}
    assert mirror_schema(decode, spec.sink.merge).names == ["id", "name", "qty", *MIRROR_COLUMNS]
