"""One parser for the integers users type, with one wording of its errors."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.model import StartPolicy
from airflow_kafka_offsets.core.values import enum_value, is_unset, optional_int
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


@pytest.mark.parametrize("value", [None, "", "  ", "None", "null"])
def test_unset(value: object) -> None:
    assert is_unset(value) and optional_int(value, "x", minimum=1) is None


@pytest.mark.parametrize(("value", "minimum", "expected"), [(3, 1, 3), (" 42 ", 1, 42), ("0", 0, 0), ("-5", None, -5)])
def test_whole_numbers(value: object, minimum: int | None, expected: int) -> None:
    assert optional_int(value, "x", minimum=minimum) == expected


@pytest.mark.parametrize(
    ("value", "minimum", "message"),
    [
        ("two", 1, "cap must be a positive integer, got 'two'"),
        ("1.5", 1, "cap must be a positive integer, got '1.5'"),
        (0, 1, "cap must be a positive integer, got 0"),
        (-1, 0, "cap must be a non-negative integer, got -1"),
        (True, None, "cap must be a whole number, got True"),
        (2.0, None, "cap must be a whole number, got 2.0"),
        ("4", 5, "cap must be a whole number of at least 5, got '4'"),
    ],
)
def test_bad_numbers_name_the_field(value: object, minimum: int | None, message: str) -> None:
    with pytest.raises(InvalidPipelineSpecError) as info:
        optional_int(value, "cap", minimum=minimum)
    assert str(info.value) == message


def test_enum_lists_the_choices() -> None:
    assert enum_value(StartPolicy, "latest", "starting_offsets") is StartPolicy.LATEST
    with pytest.raises(
        InvalidPipelineSpecError, match="starting_offsets must be one of earliest, latest, error; got 'soon'"
    ):
        enum_value(StartPolicy, "soon", "starting_offsets")
