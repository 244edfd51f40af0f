"""Which columns of the pipeline's output someone else dropped from its Iceberg table (sinks/iceberg.py)."""

from __future__ import annotations

import pyarrow as pa

from airflow_kafka_offsets.sinks.iceberg import _dropped_columns

NESTED = pa.struct([("id", pa.string()), ("n", pa.int64())])
WANTED = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("decoded", NESTED)])


def test_a_column_an_earlier_schema_had_and_the_current_one_lacks_was_dropped_nested_ones_too():
    current = pa.schema([("key", pa.binary()), ("decoded", pa.struct([("id", pa.string())]))])
    assert _dropped_columns([WANTED, current], current, WANTED) == ["decoded.n", "value"]


def test_a_column_the_table_never_had_is_one_to_add_not_a_dropped_one():
    current = pa.schema([("key", pa.binary()), ("value", pa.binary())])
    assert _dropped_columns([current], current, WANTED) == []
    assert _dropped_columns([WANTED], WANTED, WANTED) == []
