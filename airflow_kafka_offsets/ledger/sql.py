"""What every part of a ledger transaction uses: statements on its cursor, and parameter encodings.

Works with psycopg2 and psycopg 3 cursors (the Postgres provider hands out either): only DB-API
calls and ``%s`` parameters are used; ``{s}`` in a statement is the ledger's quoted schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from airflow_kafka_offsets.errors import LedgerError
from airflow_kafka_offsets.ledger.schema import quote_schema

Row = tuple[Any, ...]


def jsonb(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def from_json(value: Any) -> Any:
    """A ``jsonb`` column's value (psycopg 3 parses it, psycopg2 with some settings hands out text)."""
    return json.loads(value) if isinstance(value, str) else value


def int_array(values: Iterable[int | None]) -> str:
    """A PostgreSQL array literal, for ``unnest(%s::bigint[], ...)`` over many partitions.

    The server reads it as one constant; a Python list goes out as ``ARRAY[...]`` with one
    expression per element, which takes longer to parse and plan than the statement takes to run.
    """
    return "{" + ",".join(map(str, values)).replace("None", "NULL") + "}"  # str(int) never holds "None"


def text_array(values: Iterable[str]) -> str:
    """Like :func:`int_array`, for text (each element double-quoted, backslash-escaped)."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


class Statements:
    """Statements inside one open transaction: the base of every part of :class:`LedgerTransaction`."""

    def __init__(self, cursor: Any, schema: str) -> None:
        self._cur = cursor
        self.s = quote_schema(schema)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        self._cur.execute(sql.format(s=self.s), params)
        return self._cur

    def fetchone(self, sql: str, params: Sequence[Any] | None = None) -> Row | None:
        row: Row | None = self.execute(sql, params).fetchone()
        return row

    def fetchrow(self, sql: str, params: Sequence[Any] | None = None) -> Row:
        """The one row a statement must return (a missing row is a bug, not bad input)."""
        row = self.fetchone(sql, params)
        if row is None:
            raise LedgerError(f"no row from: {sql.split(' FROM ')[0][:80]}")
        return row

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[Row]:
        return list(self.execute(sql, params).fetchall())

    def table_exists(self, table: str) -> bool:
        """Whether the ledger's schema holds ``table`` (for readers that never create it)."""
        return self.fetchrow("SELECT to_regclass(%s)", (f"{self.s}.{table}",))[0] is not None
