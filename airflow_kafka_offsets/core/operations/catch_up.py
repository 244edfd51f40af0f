"""catch-up: drain a backlog in batches capped by the pipeline's limits (Spark)."""

from __future__ import annotations

from typing import Any

from airflow_kafka_offsets.core.operation_input import Field, Operation, parse_whole_number

OPERATION = Operation("catch_up", "Catch-up", "drain a backlog in capped batches", uses_spark=True)


def _max_batches(value: Any) -> int:
    return parse_whole_number(value, minimum=1, maximum=10000, example="10")


FIELDS: tuple[Field, ...] = (
    OPERATION.field(
        "catch_up_max_batches",
        "at most this many batches",
        "Between 1 and 10000 (empty: 10).",
        _max_batches,
        json_type="integer",
        default=10,
        minimum=1,
        maximum=10000,
        cli="--max-batches",
    ),
)
