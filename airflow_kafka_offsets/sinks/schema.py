"""The Arrow schema of what the Spark app writes: the Kafka columns, plus the decoded ones.

Every sink reads it: the directory sink for the empty Parquet file of a batch without records,
the table sinks to create their tables.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_kafka_offsets.core.ddl import DdlType, parse_ddl
from airflow_kafka_offsets.core.merge import MergeSpec, row_ddl
from airflow_kafka_offsets.core.model import DecodeSpec
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import (
    CHANGE_OP,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    SOURCE_POSITION,
    SOURCE_TS_MS,
)

# The columns the Spark app writes (spark_apps/kafka_range_batch.py), as Arrow reads them back.
RECORD_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))),
    ]
)
_ARROW_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "date": pa.date32(),
    "string": pa.string(),
    "binary": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def _arrow_type(kind: DdlType) -> pa.DataType:
    """How Spark's Parquet output of a DDL type reads back in Arrow (lists' items are 'element')."""
    if kind.kind == "array":
        return pa.list_(pa.field("element", _arrow_type(kind.children[0].type)))
    if kind.kind == "map":
        return pa.map_(_arrow_type(kind.children[0].type), _arrow_type(kind.children[1].type))
    if kind.kind == "struct":
        return pa.struct([(f.name, _arrow_type(f.type)) for f in kind.children])
    if kind.kind == "decimal":
        return pa.decimal128(kind.precision, kind.scale)
    return _ARROW_PRIMITIVES[kind.kind]


def output_schema(decode: DecodeSpec | None) -> pa.Schema:
    """The Arrow schema of a batch's output: the record columns, plus the decoded columns with decoding."""
    if decode is None:
        return RECORD_SCHEMA
    decoded = pa.struct([(f.name, _arrow_type(f.type)) for f in parse_ddl(decode.schema)])
    return RECORD_SCHEMA.append(pa.field("decode_error", pa.string())).append(pa.field("decoded", decoded))


# Where a mirror's row last changed (core/merge.py MIRROR_COLUMNS), as the app's change set holds them.
MIRROR_METADATA = pa.schema(
    [
        (KAFKA_PARTITION, pa.int32()),
        (KAFKA_OFFSET, pa.int64()),
        (SOURCE_POSITION, pa.string()),
        (SOURCE_TS_MS, pa.int64()),
        (CHANGE_OP, pa.string()),
    ]
)


def mirror_schema(decode: DecodeSpec | None, merge: MergeSpec) -> pa.Schema:
    """The Arrow schema of a mirror table (merge mode): the source row's columns, then where each row's
    last change came from."""
    assert decode is not None  # a merge pipeline's spec always decodes (core.spec checks it)
    row_columns = row_ddl(decode.schema, merge.changes, decode.avro is not None)
    row = [pa.field(f.name, _arrow_type(f.type)) for f in parse_ddl(row_columns)]
    return pa.schema(row + list(MIRROR_METADATA))


def table_schema(decode: DecodeSpec | None, merge: MergeSpec | None) -> pa.Schema:
    """What a table sink's table holds: the mirror's rows in merge mode, else the records."""
    return mirror_schema(decode, merge) if merge is not None else output_schema(decode)
