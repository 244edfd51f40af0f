"""The fault harness's check of decoded rows (``faults_harness.avro_values.problems``): what it must flag."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kafka_offsets.core.model import SinkFormat
from faults_harness.avro_values import problems

PRODUCED = [
    {"id": "r1", "partition": 0, "offset": 0, "error": None, "decoded": {"n": 1}},
    {"id": "r2", "partition": 0, "offset": 1, "error": "unknown magic byte 0x01", "decoded": None},
]


def rows(values: list[bytes | None]) -> list[dict[str, Any]]:
    return [
        {"key": p["id"].encode(), "offset": p["offset"], "decoded": p["decoded"], "decode_error": p["error"]}
        | {"value": value}
        for p, value in zip(PRODUCED, values, strict=True)
    ]


@pytest.mark.parametrize(
    ("keep_raw_value", "values", "expected"),
    [
        (True, [b"v1", b"v2"], []),
        (True, [None, b"v2"], ["r1 at offset 0: value missing"]),
        (False, [None, b"v2"], []),
        (False, [b"v1", b"v2"], ["r1 at offset 0: value kept"]),
        (False, [None, None], ["r2 at offset 1: value missing"]),
    ],
)
def test_a_rows_value_is_there_exactly_where_keep_raw_value_says(
    keep_raw_value: bool, values: list[bytes | None], expected: list[str]
) -> None:
    assert problems(rows(values), PRODUCED, SinkFormat.ICEBERG, [], keep_raw_value) == expected
