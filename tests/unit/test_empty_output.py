"""Empty batch outputs: the DDL parser, the Arrow schema they carry, and the published directory."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from airflow_kafka_offsets.core.ddl import DdlField, DdlType, parse_ddl
from airflow_kafka_offsets.core.model import DecodeSpec
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.sinks import LocalDirectorySink
from airflow_kafka_offsets.sinks.local import REPORT_NAME
from airflow_kafka_offsets.sinks.schema import RECORD_SCHEMA, output_schema


def test_parse_ddl_types_nesting_quoting_and_modifiers():
    assert parse_ddl("id STRING, n int, `odd name` BIGINT NOT NULL COMMENT 'why, <not> a type'") == (
        DdlField("id", DdlType("string")),
        DdlField("n", DdlType("int32")),
        DdlField("odd name", DdlType("int64")),
    )
    (field,) = parse_ddl("s STRUCT<a: ARRAY<DECIMAL(12, 2)>, m MAP<STRING, STRUCT<x: DATE>>>")
    assert field.type == DdlType(
        "struct",
        (
            DdlField("a", DdlType("array", (DdlField("element", DdlType("decimal", precision=12, scale=2)),))),
            DdlField(
                "m",
                DdlType(
                    "map",
                    (
                        DdlField("key", DdlType("string")),
                        DdlField("value", DdlType("struct", (DdlField("x", DdlType("date")),))),
                    ),
                ),
            ),
        ),
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "it is empty"),
        ("id", "expected more"),
        ("id INTERVAL", "unsupported type 'interval'"),
        ("a ARRAY<STRING", "expected >"),
        ("a STRING b INT", "unexpected 'b'"),
        ("a STRING;", "unexpected ';'"),
    ],
)
def test_parse_ddl_refuses_what_it_cannot_read(text, why):
    with pytest.raises(InvalidPipelineSpecError, match=why):
        parse_ddl(text)


def test_build_spec_checks_the_json_schema_before_any_batch():
    with pytest.raises(InvalidPipelineSpecError, match="unsupported type 'variant'"):
        build_spec("p", ["t"], "/tmp/o", json_schema="v VARIANT")


def test_output_schema_matches_what_spark_writes():
    assert output_schema(None) is RECORD_SCHEMA
    decoded = output_schema(DecodeSpec("id STRING, n INT, tags ARRAY<STRING>, at TIMESTAMP, d TIMESTAMP_NTZ"))
    assert decoded.names == [*RECORD_SCHEMA.names, "decode_error", "decoded"]
    assert decoded.field("decoded").type == pa.struct(
        [
            ("id", pa.string()),
            ("n", pa.int32()),
            ("tags", pa.list_(pa.field("element", pa.string()))),
            ("at", pa.timestamp("us", tz="UTC")),
            ("d", pa.timestamp("us")),
        ]
    )


def test_publish_empty_writes_a_readable_output_with_no_rows(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    decode = DecodeSpec("id STRING")
    sink.publish_empty("p", 3, decode)
    out = tmp_path / "p" / "batch=000000000003"
    dataset = ds.dataset(str(out), format="parquet")
    assert dataset.count_rows() == 0 and dataset.schema.remove_metadata() == output_schema(decode)
    assert json.loads((out / REPORT_NAME).read_text())["partitions"] == []
    assert not (tmp_path / "_staging" / "p" / "batch=000000000003" / "empty").exists()
    sink.publish_empty("p", 3, decode)  # a second commit try replaces it whole
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", REPORT_NAME, "part-00000-empty.parquet"]
