"""reset: move the cursor like ``kafka-consumer-groups --reset-offsets`` (dry run first)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.operation_input import (
    ISO,
    CliInput,
    Field,
    Operation,
    OperationInputError,
    blank_or,
    field_named,
    is_blank,
    parse_timestamp,
    parse_topic,
    parse_whole_number,
    text,
)
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import TOPIC_NAME

OPERATION = Operation(
    "reset", "Reset", "move the cursor (a dry run unless told to apply it; a mirror table's only forward)"
)
_PARTITIONS = r"\d+(\s*,\s*\d+)*"


def parse_partitions(value: Any) -> tuple[int, ...] | None:
    """Comma-separated partition numbers; blank means every partition (None)."""
    if is_blank(value):
        return None
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    numbers = text(value)
    if not re.fullmatch(_PARTITIONS, numbers):
        raise OperationInputError(
            f"{value!r} is not a list of partition numbers: use comma-separated numbers such as 0,2, or leave it"
            " empty for every partition"
        )
    return tuple(sorted({int(p) for p in numbers.split(",")}))


def parse_reset_mode(value: Any) -> ResetMode:
    try:
        return ResetMode(text(value))
    except ValueError:
        raise OperationInputError(
            f"{value!r} is not a reset mode: use one of {', '.join(m.value for m in ResetMode)}"
        ) from None


def parse_reset_value(value: Any) -> str | None:
    """Kept as text here: which form it must take depends on the mode (see :func:`reset_value`)."""
    return None if is_blank(value) else text(value)


FIELDS: tuple[Field, ...] = (
    OPERATION.field(
        "reset_mode",
        "mode",
        "Where to move the cursor, like kafka-consumer-groups --reset-offsets.",
        parse_reset_mode,
        default=ResetMode.TO_LATEST.value,
        enum=tuple(m.value for m in ResetMode),
    ),
    OPERATION.field(
        "reset_value",
        "value",
        "Offset (to-offset), delta (shift-by) or ISO timestamp (to-datetime); the other modes ignore it.",
        parse_reset_value,
        pattern=blank_or(rf"-?\d+|{ISO}"),
    ),
    OPERATION.field(
        "reset_topic",
        "topic",
        "Empty: every topic of the pipeline.",
        parse_topic,
        pattern=blank_or(TOPIC_NAME.pattern),
        cli="--topic",
    ),
    OPERATION.field(
        "reset_partitions",
        "partitions",
        "Comma-separated partition numbers, e.g. 0,2 (empty: every partition).",
        parse_partitions,
        pattern=blank_or(_PARTITIONS),
        cli="--partitions",
    ),
)


def reset_value(mode: ResetMode, value: str | None, label: str = "Reset: value") -> int | datetime | None:
    """The reset value in the form the mode needs (ignored by the modes that take none)."""
    try:
        if mode in (ResetMode.TO_OFFSET, ResetMode.SHIFT_BY):
            if value is None:
                raise OperationInputError(f"{mode.value} needs a whole number, e.g. 42")
            return parse_whole_number(value, minimum=0 if mode is ResetMode.TO_OFFSET else None, example="42")
        if mode is ResetMode.TO_DATETIME:
            if value is None:
                raise OperationInputError("to-datetime needs a timestamp, e.g. 2026-11-21T08:00:00Z")
            return parse_timestamp(value)
        return None  # to-earliest and to-latest read no value
    except OperationInputError as exc:
        raise OperationInputError(f"{label}: {exc}") from None


def check(values: dict[str, Any], labels: Mapping[str, str]) -> None:
    """The value in the form the mode needs."""
    values["reset_value"] = reset_value(
        values["reset_mode"],
        values.get("reset_value"),
        labels.get("reset_value", field_named(FIELDS, "reset_value").title),
    )


def reset_request(values: Mapping[str, Any]) -> ResetRequest:
    """A validated reset (the parsed values of ``parse_request``) as a :class:`ResetRequest`."""
    value = values.get("reset_value")
    return ResetRequest(
        values["reset_mode"],
        offset=value if isinstance(value, int) else None,
        timestamp=value if isinstance(value, datetime) else None,
        topic=values.get("reset_topic"),
        partitions=values.get("reset_partitions"),
    )


def build_reset_request(mode: Any, value: Any = None, topic: Any = None, partitions: Any = None) -> ResetRequest:
    """Reset input as a user gives it (text or numbers) into a :class:`ResetRequest`, by the fields' rules."""
    reset_mode = field_named(FIELDS, "reset_mode").value(mode)
    values = {
        "reset_mode": reset_mode,
        "reset_value": reset_value(reset_mode, field_named(FIELDS, "reset_value").value(value)),
        "reset_topic": field_named(FIELDS, "reset_topic").value(topic),
        "reset_partitions": field_named(FIELDS, "reset_partitions").value(partitions),
    }
    return reset_request(values)


MODE_HELP: Mapping[ResetMode, str] = {
    ResetMode.TO_EARLIEST: "mode (give exactly one): move the cursor to each partition's log start",
    ResetMode.TO_LATEST: "mode: move the cursor to each partition's log end",
    ResetMode.TO_DATETIME: "mode: move the cursor to the first record at or after this ISO 8601 time",
    ResetMode.TO_OFFSET: "mode: move the cursor to this offset",
    ResetMode.SHIFT_BY: "mode: move the cursor by this many records (negative: back)",
}


def _mode_from_cli(given: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The one reset mode given (with its value); naming all of them when none or several are."""
    modes: list[tuple[ResetMode, str | None]] = []
    for mode in ResetMode:
        value = given.get(f"reset_{mode.name}")
        if mode.takes_value and value is not None:
            modes.append((mode, value))
        elif not mode.takes_value and value:
            modes.append((mode, None))
    if len(modes) != 1:
        choices = ", ".join(f"--{mode.value}" + (" VALUE" if mode.takes_value else "") for mode in ResetMode)
        got = " and ".join(f"--{mode.value}" for mode, _ in modes) or "none"
        raise OperationInputError(f"give exactly one reset mode: {choices}; got {got}")
    mode, value = modes[0]
    return {"reset_mode": mode.value, "reset_value": value}, {"reset_value": f"--{mode.value}"}


# On a command line the mode is its own flag, with the value when it takes one: --to-offset 42.
CLI = CliInput(
    tuple(
        (
            (f"--{mode.value}",),
            {"dest": f"reset_{mode.name}", "help": MODE_HELP[mode]}
            | ({"metavar": "VALUE"} if mode.takes_value else {"action": "store_true"}),
        )
        for mode in ResetMode
    ),
    _mode_from_cli,
)
