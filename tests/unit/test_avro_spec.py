"""Avro values, the pure parts: the value_format option, the reader schema's columns, what a batch records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_kafka_offsets.core.avro import (
    PROTOBUF_REFUSAL,
    AvroSchemaError,
    build_value_format,
    column_changes,
    reader_columns,
)
from airflow_kafka_offsets.core.ddl import parse_ddl
from airflow_kafka_offsets.core.model import AvroFormat, AvroReader, DecodeSpec, PipelineSpec
from airflow_kafka_offsets.core.spec import build_spec, updated_spec
from airflow_kafka_offsets.core.spec_diff import diff_specs
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.sinks.schema import output_schema

TOPICS = ("orders",)


def record(*fields: dict[str, Any], name: str = "Order") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "ako.test", "fields": list(fields)})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"type": "avro"}, AvroFormat("schema_registry_default", "orders-value", None)),
        ({"type": "avro", "version": "latest"}, AvroFormat("schema_registry_default", "orders-value", None)),
        (
            {"type": "avro", "registry_conn_id": "sr", "subject": " orders-v ", "version": 3},
            AvroFormat("sr", "orders-v", 3),
        ),
        ({"type": "avro", "version": "7"}, AvroFormat("schema_registry_default", "orders-value", 7)),
        ('{"type": "avro", "subject": "s"}', AvroFormat("schema_registry_default", "s", None)),  # rendered template
        (None, None),
        ("", None),
        ("None", None),
    ],
)
def test_value_format_as_users_give_it(given: Any, expected: AvroFormat | None) -> None:
    assert build_value_format(given, "p", TOPICS) == expected


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"type": "protobuf", "subject": "s"}, r"value_format.type 'protobuf': Protobuf values are not supported"),
        ({"type": "json"}, r"value_format.type 'json': give JSON values a json_schema"),
        ({"type": "AVRO"}, r"value_format.type must be 'avro', got 'AVRO'"),
        ({}, r"value_format.type must be 'avro', got None"),
        (
            {"type": "avro", "subjekt": "s"},
            r"value_format has unknown key\(s\) subjekt; it takes type, registry_conn_id",
        ),
        ({"type": "avro", "subject": ""}, r"value_format.subject must be a non-empty string"),
        ({"type": "avro", "subject": 5}, r"value_format.subject must be a non-empty string"),
        ({"type": "avro", "registry_conn_id": " "}, r"value_format.registry_conn_id must be a non-empty string"),
        ({"type": "avro", "version": 0}, r"value_format.version must be 'latest' or a version number"),
        ({"type": "avro", "version": "newest"}, r"value_format.version must be 'latest' or a version number"),
        ({"type": "avro", "version": True}, r"value_format.version must be 'latest' or a version number"),
        ("{not json", r"value_format must be a mapping such as"),
        (["avro"], r"value_format must be a mapping with a type"),
    ],
)
def test_bad_value_formats_are_refused_naming_the_field(given: Any, match: str) -> None:
    with pytest.raises(InvalidPipelineSpecError, match=match) as refused:
        build_value_format(given, "p", TOPICS)
    assert "pipeline 'p': value_format" in str(refused.value)


def test_protobuf_is_refused_with_the_reason() -> None:
    """spark-protobuf_2.13:4.2.0 is not on Maven Central (checked Nov 2026): no half support."""
    with pytest.raises(InvalidPipelineSpecError) as refused:
        build_spec("p", ["orders"], "/out", value_format={"type": "protobuf"})
    assert PROTOBUF_REFUSAL in str(refused.value)
    assert "spark-protobuf_2.13:4.2.0" in PROTOBUF_REFUSAL and "not published on Maven Central" in PROTOBUF_REFUSAL


def test_several_topics_need_a_subject() -> None:
    with pytest.raises(InvalidPipelineSpecError, match=r"value_format.subject is needed with several topics"):
        build_value_format({"type": "avro"}, "p", ("a", "b"))
    assert build_value_format({"type": "avro", "subject": "s"}, "p", ("a", "b")) == AvroFormat(
        "schema_registry_default", "s"
    )


def test_value_format_and_json_schema_exclude_each_other() -> None:
    with pytest.raises(InvalidPipelineSpecError, match="json_schema and value_format exclude each other"):
        build_spec("p", ["orders"], "/out", json_schema="id STRING", value_format={"type": "avro"})
    spec = build_spec("p", ["orders"], "/out", value_format={"type": "avro"}, max_decode_errors="5")
    assert spec.decode == DecodeSpec("", 5, AvroFormat("schema_registry_default", "orders-value"))
    with pytest.raises(InvalidPipelineSpecError, match="needs a json_schema or a value_format"):
        build_spec("p", ["orders"], "/out", max_decode_errors=5)


def test_the_spec_stores_the_value_format_and_reads_it_back() -> None:
    spec = build_spec("p", ["orders"], "/out", value_format={"type": "avro", "registry_conn_id": "sr", "version": 2})
    stored = spec.to_json()
    assert stored["decode"] == {
        "format": "avro",
        "type": "avro",
        "registry_conn_id": "sr",
        "subject": "orders-value",
        "version": 2,
        "max_errors": None,
    }
    assert PipelineSpec.from_json(json.loads(json.dumps(stored))) == spec
    latest = build_spec("p", ["orders"], "/out", value_format={"type": "avro"})
    assert latest.to_json()["decode"]["version"] == "latest"
    assert PipelineSpec.from_json(latest.to_json()) == latest
    # A change of the pinned version is a spec change like any other.
    assert [c.field for c in diff_specs(spec, latest).changes] == ["decode"]


def test_a_spec_change_keeps_the_value_format() -> None:
    spec = build_spec("p", ["orders"], "/out", value_format={"type": "avro", "subject": "s"})
    changed = updated_spec(spec, {"max_records_per_batch": 10})
    assert changed.decode == spec.decode and changed.max_records_per_batch == 10
    with pytest.raises(InvalidPipelineSpecError, match="exclude each other"):
        updated_spec(spec, {"json_schema": "id STRING"})
    assert updated_spec(spec, {"json_schema": "id STRING", "value_format": None}).decode == DecodeSpec("id STRING")


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (None, True),
        ("", True),
        (True, True),
        ("true", True),
        (False, False),
        ("false", False),
        ("no", False),
        ("0", False),
    ],
)
def test_keep_raw_value_as_users_and_templates_give_it(given: Any, kept: bool) -> None:
    for decoding in ({"value_format": {"type": "avro"}}, {"json_schema": "id STRING"}):
        spec = build_spec("p", ["orders"], "/out", keep_raw_value=given, **decoding)  # type: ignore[arg-type]
        assert spec.decode is not None and spec.decode.keep_raw_value is kept
        stored = json.loads(json.dumps(spec.to_json()))
        # stored only when false: a spec or batch stored before the option reads back unchanged
        assert ("keep_raw_value" in stored["decode"]) is (not kept)
        assert PipelineSpec.from_json(stored) == spec
        assert DecodeSpec.from_json(spec.decode.batch_json()).keep_raw_value is kept


def test_keep_raw_value_is_refused_without_a_decoding_or_as_anything_but_a_boolean() -> None:
    assert build_spec("p", ["orders"], "/out", keep_raw_value=True).decode is None
    with pytest.raises(InvalidPipelineSpecError, match="keep_raw_value=false needs a json_schema or a value_format"):
        build_spec("p", ["orders"], "/out", keep_raw_value=False)
    with pytest.raises(InvalidPipelineSpecError, match="keep_raw_value must be true or false, got 'sometimes'"):
        build_spec("p", ["orders"], "/out", json_schema="id STRING", keep_raw_value="sometimes")


def test_a_spec_change_keeps_or_changes_keep_raw_value() -> None:
    spec = build_spec("p", ["orders"], "/out", value_format={"type": "avro"}, keep_raw_value=False)
    assert updated_spec(spec, {"max_decode_errors": 3}).decode.keep_raw_value is False  # type: ignore[union-attr]
    changed = updated_spec(spec, {"keep_raw_value": True})
    assert changed.decode is not None and changed.decode.keep_raw_value is True
    assert [c.field for c in diff_specs(spec, changed).changes] == ["decode"]


def test_a_batch_records_its_reader_schema_beside_the_spec_fields() -> None:
    reader = AvroReader("orders-value", 3, 42, record({"name": "id", "type": "long"}))
    decode = DecodeSpec("`id` BIGINT", 2, AvroFormat("sr", "orders-value"), reader)
    data = json.loads(json.dumps(decode.batch_json()))
    assert data["schema"] == "`id` BIGINT" and data["reader"]["schema_id"] == 42
    assert DecodeSpec.from_json(data) == decode
    assert decode.to_json() == {**decode.avro.to_json(), "format": "avro", "max_errors": 2}  # type: ignore[union-attr]
    assert reader.describe() == "subject 'orders-value' version 3 (schema id 42)"
    json_decode = DecodeSpec("id STRING", 1)
    assert (
        json_decode.batch_json() == json_decode.to_json() and DecodeSpec.from_json(json_decode.to_json()) == json_decode
    )
    assert (decode.format, decode.format_name, json_decode.format, json_decode.format_name) == (
        "avro",
        "Avro",
        "json",
        "JSON",
    )


RICH = record(
    {"name": "id", "type": "long"},
    {"name": "amount", "type": "double"},
    {"name": "currency", "type": ["null", "string"], "default": None},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lat", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {
        "name": "fx",
        "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3},
    },
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "kind2", "type": ["null", "Kind"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "mixed", "type": ["null", "int", "string"], "default": None},
    {"name": "il", "type": ["int", "long"]},
    {"name": "fd", "type": ["null", "float", "double"], "default": None},
    {"name": "sub", "type": {"type": "record", "name": "Sub", "fields": [{"name": "x", "type": "int"}]}},
    {"name": "sub2", "type": ["null", "Sub"], "default": None},
    {"name": "blob", "type": {"type": "fixed", "name": "F2", "size": 2}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
)
# What Spark 4.2's from_avro makes of RICH (its schema's simpleString, checked with spark-avro 4.2.0).
RICH_IN_SPARK = (
    "struct<id:bigint,amount:double,currency:string,day:date,at:timestamp,lat:timestamp_ntz,price:decimal(10,2),"
    "fx:decimal(12,3),kind:string,kind2:string,tags:array<string>,attrs:map<string,bigint>,"
    "mixed:struct<member0:int,member1:string>,il:bigint,fd:double,sub:struct<x:int>,sub2:struct<x:int>,"
    "blob:binary,tm:int,u:string>"
)


def simple_string(ddl: str) -> str:
    """A DDL schema in Spark's simpleString form, from this package's own parse of it."""
    names = {"int32": "int", "int64": "bigint", "float64": "double", "float32": "float", "int8": "tinyint"}

    def kind(t: Any) -> str:
        if t.kind == "struct":
            return "struct<" + ",".join(f"{f.name}:{kind(f.type)}" for f in t.children) + ">"
        if t.kind == "array":
            return f"array<{kind(t.children[0].type)}>"
        if t.kind == "map":
            return f"map<{kind(t.children[0].type)},{kind(t.children[1].type)}>"
        if t.kind == "decimal":
            return f"decimal({t.precision},{t.scale})"
        return names.get(t.kind, t.kind)

    return "struct<" + ",".join(f"{f.name}:{kind(f.type)}" for f in parse_ddl(ddl)) + ">"


def test_the_reader_schemas_columns_are_what_spark_makes_of_it() -> None:
    assert simple_string(reader_columns(RICH)) == RICH_IN_SPARK
    # and the sinks' Arrow schema takes them (an empty batch's file, a table's columns)
    decode = DecodeSpec(reader_columns(RICH), avro=AvroFormat("sr", "s"))
    decoded = output_schema(decode).field("decoded").type
    assert [f.name for f in decoded][:4] == ["id", "amount", "currency", "day"]


def test_named_types_resolve_by_full_name_and_namespace() -> None:
    schema = json.dumps(
        {
            "type": "record",
            "name": "ako.test.Outer",
            "fields": [
                {"name": "a", "type": {"type": "record", "name": "Inner", "fields": [{"name": "v", "type": "string"}]}},
                {"name": "b", "type": "Inner"},
                {"name": "c", "type": "ako.test.Inner"},
                {"name": "order", "type": "int"},  # a SQL keyword: every name is quoted
            ],
        }
    )
    assert reader_columns(schema) == (
        "`a` STRUCT<`v` STRING>, `b` STRUCT<`v` STRING>, `c` STRUCT<`v` STRING>, `order` INT"
    )


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        (json.dumps("string"), "must be an Avro record"),
        (json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}), "must be an Avro record"),
        ("{nope", "is not JSON"),
        (record(), "a record without fields"),
        (record({"name": "n", "type": "null"}), "field n has type null"),
        (record({"name": "n", "type": ["null"]}), "field n is a union of null only"),
        (record({"name": "x", "type": "Missing"}), "refers to type 'Missing', which the schema does not define"),
        (
            record({"name": "next", "type": ["null", "ako.test.Order"]}),
            "field next refers to record ako.test.Order recursively",
        ),
        (
            record({"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}}),
            "field d is a decimal with precision 40",
        ),
    ],
)
def test_reader_schemas_spark_cannot_decode_are_refused(schema: str, match: str) -> None:
    with pytest.raises(AvroSchemaError, match=match):
        reader_columns(schema)


def test_column_changes_name_what_is_not_an_added_field() -> None:
    before = "`id` BIGINT, `amount` DOUBLE, `s` STRUCT<`x`: INT>, `d` DECIMAL(5, 2)"
    assert column_changes(before, before + ", `n` STRING") == []
    assert column_changes(before, "`id` BIGINT, `amount` STRING, `s` STRUCT<`x`: BIGINT, `y`: INT>") == [
        "decoded.amount changes from DOUBLE to STRING",
        "decoded.s.x changes from INT to BIGINT",
        "decoded.d is dropped",
    ]
