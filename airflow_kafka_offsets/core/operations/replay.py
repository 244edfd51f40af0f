"""replay: rebuild committed batches' output, chosen by batch numbers, offsets or a time window (Spark)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.model import TopicPartition
from airflow_kafka_offsets.core.operation_input import (
    ISO,
    Field,
    Operation,
    OperationInputError,
    blank_or,
    is_blank,
    optional_text,
    parse_timestamp,
    parse_whole_number,
    text,
)

OPERATION = Operation(
    "replay", "Replay", "rebuild committed batches' output (a mirror table's latest only)", uses_spark=True
)
_RANGE = r"[A-Za-z0-9._-]+:\d+:\d+-\d+"


@dataclass(frozen=True)
class ReplaySelection:
    """Which committed batches to replay: by batch numbers, by offsets per partition, or by time."""

    first_batch: int | None = None
    last_batch: int | None = None
    offset_ranges: tuple[tuple[TopicPartition, int, int], ...] = ()
    since: datetime | None = None
    until: datetime | None = None


def parse_offset_ranges(value: Any) -> tuple[tuple[TopicPartition, int, int], ...]:
    """``topic:partition:start-end`` items, comma-separated, spaces allowed; ``end`` is exclusive."""
    if is_blank(value):
        return ()
    ranges = []
    for item in text(value).split(","):
        item = item.strip()
        if not re.fullmatch(_RANGE, item):
            raise OperationInputError(
                f"{item!r} is not an offset range: use topic:partition:start-end, e.g. orders:0:100-200"
            )
        topic, partition, span = item.rsplit(":", 2)
        start, end = (int(x) for x in span.split("-", 1))
        if end <= start:
            raise OperationInputError(
                f"offset range {item!r} is empty: the end ({end}) is exclusive and must be"
                f" greater than the start ({start})"
            )
        ranges.append((TopicPartition(topic, int(partition)), start, end))
    return tuple(ranges)


def parse_batch_span(value: Any) -> tuple[int, int] | None:
    """``FIRST`` or ``FIRST-LAST`` batch numbers (the CLI's ``--batches``)."""
    if is_blank(value):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", str(value))
    if not match:
        raise OperationInputError(f"expected FIRST or FIRST-LAST batch numbers, e.g. 3 or 3-5; got {value!r}")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise OperationInputError(f"batch numbers start at 1 and LAST must not be below FIRST; got {value!r}")
    return first, last


def _batch_number(value: Any) -> int:
    return parse_whole_number(value, minimum=1, example="3")


def _batch_field(end: str, description: str) -> Field:
    """The first and the last batch number: one input each, read alike."""
    return OPERATION.field(
        f"replay_{end}_batch", f"{end} batch", description, _batch_number, json_type="integer", minimum=1
    )


def _window_field(end: str, description: str) -> Field:
    """``since`` and ``until``, the time window's two ends: one input each, read alike."""
    return OPERATION.field(f"replay_{end}", end, description, parse_timestamp, pattern=blank_or(ISO), cli=f"--{end}")


FIELDS: tuple[Field, ...] = (
    _batch_field("first", "First batch number to replay (empty: from the first)."),
    _batch_field("last", "Last batch number to replay (empty: up to the newest)."),
    Field(
        "replay_batches",
        "--batches",
        "FIRST[-LAST] batch numbers, e.g. 3 or 3-5",
        (OPERATION.name,),
        parse_batch_span,
        in_form=False,
        cli="--batches",
    ),
    OPERATION.field(
        "replay_offset_ranges",
        "offset ranges",
        "topic:partition:start-end, comma-separated, end exclusive, e.g. orders:0:100-200, orders:1:0-50.",
        parse_offset_ranges,
        pattern=blank_or(rf"{_RANGE}(\s*,\s*{_RANGE})*"),
        cli="--offsets",
    ),
    _window_field("since", "Start of a time window of record timestamps, ISO 8601, e.g. 2026-11-21T08:00:00Z."),
    _window_field("until", "End of the time window, ISO 8601 (empty: now)."),
    OPERATION.field(
        "replay_output_root",
        "separate output root",
        "Rebuild under this root instead (empty: rebuild the batches' outputs in place).",
        optional_text,
        cli="--output-root",
    ),
)


def check(values: dict[str, Any], labels: Mapping[str, str]) -> None:
    """Exactly one selection: batch numbers (``--batches`` becomes first and last), offsets, or a window."""
    span = values.pop("replay_batches", None)
    if span is not None:
        values["replay_first_batch"], values["replay_last_batch"] = span
    first, last = values.get("replay_first_batch"), values.get("replay_last_batch")
    if first is not None and last is not None and last < first:
        raise OperationInputError(f"Replay: last batch ({last}) is before the first batch ({first})")
    since, until = values.get("replay_since"), values.get("replay_until")
    if since is None and until is not None:
        raise OperationInputError("Replay: until needs a since")
    if since is not None and until is not None and until <= since:
        raise OperationInputError("Replay: until must be after since")
    chosen = [first is not None or last is not None, bool(values.get("replay_offset_ranges")), since is not None]
    if sum(chosen) != 1:
        raise OperationInputError(
            "Replay: give exactly one of batch numbers, offset ranges or a since time"
            f" ({'none' if not any(chosen) else 'several'} given)"
        )


def selection(values: Mapping[str, Any]) -> ReplaySelection:
    """A validated replay (the parsed values of ``parse_request``) as a :class:`ReplaySelection`."""
    return ReplaySelection(
        first_batch=values.get("replay_first_batch"),
        last_batch=values.get("replay_last_batch"),
        offset_ranges=values.get("replay_offset_ranges") or (),
        since=values.get("replay_since"),
        until=values.get("replay_until"),
    )
