"""Spark DDL schemas (a pipeline's ``json_schema``) parsed into a small type tree, without Spark.

Pure. The local sink turns the tree into the Arrow schema Spark writes, so a batch that reads
no records still gets an output with exactly the columns of its non-empty siblings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_kafka_offsets.errors import InvalidPipelineSpecError

# Spark SQL type names (and aliases) for JSON-decodable columns.
PRIMITIVES = {
    "boolean": "boolean",
    "tinyint": "int8",
    "byte": "int8",
    "smallint": "int16",
    "short": "int16",
    "int": "int32",
    "integer": "int32",
    "bigint": "int64",
    "long": "int64",
    "float": "float32",
    "real": "float32",
    "double": "float64",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "string": "string",
    "varchar": "string",
    "char": "string",
    "binary": "binary",
    "decimal": "decimal",
    "dec": "decimal",
    "numeric": "decimal",
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|'(?:[^'\\]|\\.)*'|[<>(),:])")


@dataclass(frozen=True)
class DdlType:
    """``kind`` is a value of PRIMITIVES, or array / map / struct with ``children``."""

    kind: str
    children: tuple[DdlField, ...] = ()
    precision: int = 10
    scale: int = 0


@dataclass(frozen=True)
class DdlField:
    name: str
    type: DdlType


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if match is None:
                raise self.error(f"unexpected {text[pos:].strip()[:20]!r}")
            self.tokens.append(match.group(1))
            pos = match.end()
        self.i = 0

    def error(self, why: str) -> InvalidPipelineSpecError:
        return InvalidPipelineSpecError(
            f"json_schema {self.text!r} is not a Spark DDL schema this package reads: {why}"
        )

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.lower() != expected):
            raise self.error(f"expected {expected or 'more'}, found {token!r}")
        self.i += 1
        return token

    def fields(self, end: str | None) -> tuple[DdlField, ...]:
        out = [self.field(end)]
        while self.peek() == ",":
            self.take(",")
            out.append(self.field(end))
        return tuple(out)

    def field(self, end: str | None) -> DdlField:
        name = self.take()
        name = name[1:-1].replace("``", "`") if name.startswith("`") else name
        if self.peek() == ":":
            self.take(":")
        kind = self.type()
        while self.peek() not in (",", end):
            word = self.take().lower()
            if word == "not":
                self.take("null")
            elif word == "comment":
                self.take()
            else:
                raise self.error(f"unexpected {word!r} after the type of {name!r}")
        return DdlField(name, kind)

    def type(self) -> DdlType:
        word = self.take().lower()
        if word == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return DdlType("array", (DdlField("element", element),))
        if word == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return DdlType("map", (DdlField("key", key), DdlField("value", value)))
        if word == "struct":
            self.take("<")
            children = self.fields(">") if self.peek() != ">" else ()
            self.take(">")
            return DdlType("struct", children)
        if word not in PRIMITIVES:
            raise self.error(
                f"unsupported type {word!r} (supported: {', '.join(sorted(PRIMITIVES))}, array, map, struct)"
            )
        numbers = []
        if self.peek() == "(":
            self.take("(")
            numbers.append(int(self.take()))
            if self.peek() == ",":
                self.take(",")
                numbers.append(int(self.take()))
            self.take(")")
        if PRIMITIVES[word] == "decimal":
            return DdlType(
                "decimal", precision=numbers[0] if numbers else 10, scale=numbers[1] if len(numbers) > 1 else 0
            )
        return DdlType(PRIMITIVES[word])


def parse_ddl(text: str) -> tuple[DdlField, ...]:
    """The columns of a DDL schema such as ``"id STRING, tags ARRAY<STRING>, at TIMESTAMP"``."""
    parser = _Parser(text)
    if parser.peek() is None:
        raise parser.error("it is empty")
    fields = parser.fields(None)
    if parser.peek() is not None:
        raise parser.error(f"unexpected {parser.peek()!r}")
    return fields


_DDL_NAMES = {
    "boolean": "BOOLEAN",
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INT",
    "int64": "BIGINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "string": "STRING",
    "binary": "BINARY",
}


def render_type(kind: DdlType) -> str:
    """A parsed type as Spark DDL again (``parse_ddl`` reads it back to the same tree)."""
    if kind.kind == "decimal":
        return f"DECIMAL({kind.precision}, {kind.scale})"
    if kind.kind == "array":
        return f"ARRAY<{render_type(kind.children[0].type)}>"
    if kind.kind == "map":
        return f"MAP<{render_type(kind.children[0].type)}, {render_type(kind.children[1].type)}>"
    if kind.kind == "struct":
        return f"STRUCT<{render_ddl(kind.children)}>"
    return _DDL_NAMES[kind.kind]


def render_ddl(fields: tuple[DdlField, ...]) -> str:
    """Parsed columns as Spark DDL again (names quoted)."""
    return ", ".join(f"`{f.name.replace('`', '``')}` {render_type(f.type)}" for f in fields)
