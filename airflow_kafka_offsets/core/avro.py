"""Avro values: the ``value_format`` pipeline option, and a reader schema's Spark columns, without Spark.

Pure. A batch's ``decoded`` column is what Spark's ``from_avro`` makes of the reader schema
(Spark's ``SchemaConverters``: records are structs, enums strings, fixed binary, ``[null, T]`` a
nullable ``T``, other unions structs of ``member0``, ``member1`` ...). The sinks need those columns
before Spark runs (a table is created or evolved when the batch is planned, an empty batch gets a
file with the same columns), so the same conversion is done here, into the Spark DDL the JSON
path uses; the Spark app casts what ``from_avro`` returns to it, so both always agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.model import AvroFormat
from airflow_kafka_offsets.errors import InvalidPipelineSpecError

DEFAULT_REGISTRY_CONN_ID = "schema_registry_default"
VALUE_FORMAT_KEYS = ("type", "registry_conn_id", "subject", "version")
# Spark's connector for Protobuf is not published for the Spark this package's workers run.
PROTOBUF_REFUSAL = (
    "Protobuf values are not supported: Spark decodes Protobuf with org.apache.spark:spark-protobuf, and "
    "spark-protobuf_2.13:4.2.0 (the Spark line the package's workers run) is not published on Maven Central, "
    "so a Protobuf batch could not run anywhere this package is tested; keep the raw bytes (no value_format) "
    "and decode them downstream, or produce Avro"
)

_PRIMITIVES = {
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "bytes": "BINARY",
    "string": "STRING",
}
_NAMED = ("record", "enum", "fixed")
# Logical types Spark reads as their own column types (the others read as their underlying type).
_LOGICAL: dict[tuple[Any, Any], str] = {
    ("int", "date"): "DATE",
    ("long", "timestamp-millis"): "TIMESTAMP",
    ("long", "timestamp-micros"): "TIMESTAMP",
    ("long", "local-timestamp-millis"): "TIMESTAMP_NTZ",
    ("long", "local-timestamp-micros"): "TIMESTAMP_NTZ",
}


def build_value_format(value_format: Any, pipeline: str, topics: tuple[str, ...]) -> AvroFormat | None:
    """``value_format`` as users give it (a mapping, or its JSON text from a template) into an
    :class:`AvroFormat`; None when unset. Every refusal names the field."""
    if value_format is None or (isinstance(value_format, str) and value_format.strip() in ("", "None", "null")):
        return None
    where = f"pipeline {pipeline!r}: value_format"
    if isinstance(value_format, str):
        try:
            value_format = json.loads(value_format)
        except ValueError:
            raise InvalidPipelineSpecError(
                f'{where} must be a mapping such as {{"type": "avro", "subject": "orders-value"}} '
                f"(or its JSON text), got {value_format!r}"
            ) from None
    if not isinstance(value_format, Mapping):
        raise InvalidPipelineSpecError(f"{where} must be a mapping with a type, got {value_format!r}")
    unknown = sorted(set(value_format) - set(VALUE_FORMAT_KEYS))
    if unknown:
        raise InvalidPipelineSpecError(
            f"{where} has unknown key(s) {', '.join(map(str, unknown))}; it takes {', '.join(VALUE_FORMAT_KEYS)}"
        )
    kind = value_format.get("type")
    if kind == "protobuf":
        raise InvalidPipelineSpecError(f"{where}.type 'protobuf': {PROTOBUF_REFUSAL}")
    if kind == "json":
        raise InvalidPipelineSpecError(f"{where}.type 'json': give JSON values a json_schema (a Spark DDL schema)")
    if kind != "avro":
        raise InvalidPipelineSpecError(f"{where}.type must be 'avro', got {kind!r}")
    conn_id = _text(value_format.get("registry_conn_id", DEFAULT_REGISTRY_CONN_ID), f"{where}.registry_conn_id")
    subject = value_format.get("subject")
    if subject is None:
        if len(topics) != 1:
            raise InvalidPipelineSpecError(
                f"{where}.subject is needed with several topics (the reader schema is one subject's), e.g. "
                f"'{topics[0]}-value'"
            )
        subject = f"{topics[0]}-value"  # the serializers' default TopicNameStrategy
    return AvroFormat(conn_id, _text(subject, f"{where}.subject"), _version(value_format.get("version"), where))


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidPipelineSpecError(f"{what} must be a non-empty string, got {value!r}")
    if any(c in value for c in "\r\n\t"):
        raise InvalidPipelineSpecError(f"{what} must be one line of text, got {value!r}")
    return value.strip()


def _version(value: Any, where: str) -> int | None:
    if value is None or value == "latest":
        return None
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not text.isdigit() or int(text) < 1:
        raise InvalidPipelineSpecError(
            f"{where}.version must be 'latest' or a version number of the subject (1 or more), got {value!r}"
        )
    return int(text)


class AvroSchemaError(InvalidPipelineSpecError):
    """A reader schema the package cannot turn into columns; the message says which part and why."""


def reader_columns(schema: str) -> str:
    """The Spark DDL (``"`id` BIGINT, `note` STRING"``) of the struct ``from_avro`` makes of ``schema``,
    an Avro record schema (JSON text)."""
    try:
        parsed = json.loads(schema)
    except ValueError as exc:
        raise AvroSchemaError(f"the reader schema is not JSON: {exc}") from None
    if not isinstance(parsed, Mapping) or parsed.get("type") != "record":
        raise AvroSchemaError(
            f"the reader schema must be an Avro record (its fields become the decoded columns), got {_short(parsed)}"
        )
    fields = _Converter().record_fields(parsed, namespace=None, path="")
    if not fields:
        raise AvroSchemaError("the reader schema is a record without fields: there is nothing to decode")
    return fields


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Converter:
    """Avro types into Spark DDL types; named types are remembered so later references resolve."""

    def __init__(self) -> None:
        self.named: dict[str, tuple[Mapping[str, Any], str | None]] = {}
        self.open_records: set[str] = set()

    def record_fields(self, record: Mapping[str, Any], namespace: str | None, path: str) -> str:
        name = record.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"a record at {path or 'the top'} has no name")
        full = _full_name(name, record.get("namespace") or namespace)
        inner_namespace = full.rsplit(".", 1)[0] if "." in full else None
        self.named[full] = (record, inner_namespace)
        fields = record.get("fields")
        if not isinstance(fields, list):
            raise AvroSchemaError(f"record {full} has no list of fields")
        self.open_records.add(full)
        try:
            columns = []
            for field in fields:
                if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
                    raise AvroSchemaError(f"record {full} has a field without a name: {_short(field)}")
                field_path = f"{path}.{field['name']}" if path else field["name"]
                columns.append(f"{_quote(field['name'])} {self.type(field.get('type'), inner_namespace, field_path)}")
        finally:
            self.open_records.discard(full)
        return ", ".join(columns)

    def type(self, avro: Any, namespace: str | None, path: str) -> str:
        if isinstance(avro, list):
            return self.union(avro, namespace, path)
        if isinstance(avro, str):
            return self.named_reference(avro, namespace, path)
        if not isinstance(avro, Mapping):
            raise AvroSchemaError(f"field {path} has an unreadable type {_short(avro)}")
        kind = avro.get("type")
        if "spark.sql.catalyst.type" in avro:
            raise AvroSchemaError(f"field {path} sets spark.sql.catalyst.type, which this package does not read")
        if kind in _NAMED:
            return self.named_type(avro, namespace, path, define=True)
        if kind == "array":
            return f"ARRAY<{self.type(avro.get('items'), namespace, path + '[]')}>"
        if kind == "map":
            return f"MAP<STRING, {self.type(avro.get('values'), namespace, path + '{}')}>"
        logical = _LOGICAL.get((kind, avro.get("logicalType")))
        if logical is not None:
            return logical
        if kind == "bytes" and avro.get("logicalType") == "decimal":
            return _decimal(avro, path)
        return self.type(kind, namespace, path)  # a primitive (its other logical types read as it)

    def named_reference(self, name: str, namespace: str | None, path: str) -> str:
        """A primitive type's name, or a reference to a named type defined earlier."""
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        if name == "null":
            raise AvroSchemaError(f"field {path} has type null: Spark has no column type for it")
        full = name if name in self.named else _full_name(name, namespace)
        if full not in self.named:
            raise AvroSchemaError(f"field {path} refers to type {name!r}, which the schema does not define")
        if full in self.open_records:
            raise AvroSchemaError(f"field {path} refers to record {full} recursively: Spark cannot decode that")
        definition, defined_in = self.named[full]
        return self.named_type(definition, defined_in, path, define=False)

    def named_type(self, avro: Mapping[str, Any], namespace: str | None, path: str, define: bool) -> str:
        kind = avro.get("type")
        if define:
            name = avro.get("name")
            if not isinstance(name, str) or not name:
                raise AvroSchemaError(f"the {kind} of field {path} has no name")
            if kind != "record":
                self.named[_full_name(name, avro.get("namespace") or namespace)] = (avro, namespace)
        if kind == "record":
            return f"STRUCT<{self.record_fields(avro, namespace, path)}>"
        if kind == "enum":
            return "STRING"
        if avro.get("logicalType") == "decimal" and _fits(avro):
            return _decimal(avro, path)
        return "BINARY"  # fixed

    def union(self, branches: list[Any], namespace: str | None, path: str) -> str:
        if any(b == "null" or (isinstance(b, Mapping) and b.get("type") == "null") for b in branches):
            rest = [b for b in branches if not (b == "null" or (isinstance(b, Mapping) and b.get("type") == "null"))]
            if not rest:
                raise AvroSchemaError(f"field {path} is a union of null only: Spark has no column type for it")
            return self.type(rest[0], namespace, path) if len(rest) == 1 else self.union(rest, namespace, path)
        if len(branches) == 1:
            return self.type(branches[0], namespace, path)
        kinds = {b if isinstance(b, str) else b.get("type") if isinstance(b, Mapping) else None for b in branches}
        if len(branches) == 2 and kinds in ({"int", "long"}, {"float", "double"}):  # Spark widens these two
            return "BIGINT" if "long" in kinds else "DOUBLE"
        members = [f"`member{i}` {self.type(b, namespace, f'{path}|{i}')}" for i, b in enumerate(branches)]
        return f"STRUCT<{', '.join(members)}>"


def _fits(fixed: Mapping[str, Any]) -> bool:
    """Avro drops a fixed's decimal logical type when its size cannot hold the precision."""
    size, precision = fixed.get("size"), fixed.get("precision")
    if not isinstance(size, int) or not isinstance(precision, int):
        return False
    return precision <= int((8 * size - 1) * 0.30102999566398120)  # floor(log10(2^(8*size-1) - 1))


def _decimal(avro: Mapping[str, Any], path: str) -> str:
    precision, scale = avro.get("precision"), avro.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision <= 38:
        raise AvroSchemaError(
            f"field {path} is a decimal with precision {precision!r} and scale {scale!r}: Spark takes a precision "
            "of 1 to 38 and a scale from 0 to the precision"
        )
    return f"DECIMAL({precision}, {scale})"


def column_changes(before: str, after: str) -> list[str]:
    """How the ``decoded`` columns of DDL ``after`` differ from ``before`` other than by added fields."""
    from airflow_kafka_offsets.core.ddl import DdlField, parse_ddl

    def walk(old: tuple[DdlField, ...], new: tuple[DdlField, ...], path: str) -> list[str]:
        found = []
        wanted = {f.name: f for f in new}
        for field in old:
            name = f"{path}.{field.name}"
            if field.name not in wanted:
                found.append(f"{name} is dropped")
            elif field.type.kind == "struct" and wanted[field.name].type.kind == "struct":
                found += walk(field.type.children, wanted[field.name].type.children, name)
            elif field.type != wanted[field.name].type:
                found.append(f"{name} changes from {_kind(field.type)} to {_kind(wanted[field.name].type)}")
        return found

    return walk(parse_ddl(before), parse_ddl(after), "decoded")


_SPARK_NAMES = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float32": "FLOAT"}
_SPARK_NAMES |= {"float64": "DOUBLE", "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ"}


def _kind(kind: object) -> str:
    """A DDL type's Spark name (a nested type by its kind only)."""
    name = str(getattr(kind, "kind", "?"))
    if name == "decimal":
        return f"DECIMAL({getattr(kind, 'precision', '?')}, {getattr(kind, 'scale', '?')})"
    return _SPARK_NAMES.get(name, name.upper() + ("<...>" if name in ("array", "map", "struct") else ""))
