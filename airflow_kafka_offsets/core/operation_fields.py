"""The manual operations and their input fields, defined once for the trigger form, the operator and the CLI.

Each :class:`Field` carries its form rendering (JSON schema type, title, section, pattern), the
operations that read it and the parser that turns user text into a value with a message a user
understands. Empty and blank text mean "not given" everywhere: the field's default, or "all"
where the description says so. Fields that the chosen operation does not read are ignored, so
they never block a run. Adding an operation means adding an :class:`Operation` (and its fields)
here and its handler in :mod:`airflow_kafka_offsets.service.commands`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.model import DataLossPolicy, StartPolicy, TopicPartition
from airflow_kafka_offsets.core.resets import ResetError, ResetMode, ResetRequest, parse_datetime
from airflow_kafka_offsets.core.spec import PIPELINE_NAME, TOPIC_NAME
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


class OperationInputError(InvalidPipelineSpecError):
    """A manual operation's input (form field or CLI option) is not valid."""


@dataclass(frozen=True)
class Operation:
    name: str
    title: str
    help: str
    uses_spark: bool = False


OPERATIONS: tuple[Operation, ...] = (
    Operation("status", "Status", "offsets, lag and recent batches"),
    Operation("replay", "Replay", "rebuild committed batches' output", uses_spark=True),
    Operation("reset", "Reset", "move the cursor (a dry run unless told to apply it)"),
    Operation("catch_up", "Catch-up", "drain a backlog in capped batches", uses_spark=True),
    Operation("abort", "Abort", "abort the planned batch"),
    Operation(
        "change_spec",
        "Change spec",
        "change the pipeline's topics, caps or policies on purpose (a dry run unless told to apply it)",
    ),
    Operation(
        "sweep",
        "Sweep",
        "remove staging of dead attempts and output of aborted batches (a dry run unless told to apply it)",
    ),
)
OPERATION_NAMES: tuple[str, ...] = tuple(op.name for op in OPERATIONS)


def operation(name: str) -> Operation:
    for op in OPERATIONS:
        if op.name == name:
            return op
    raise OperationInputError(f"operation must be one of {', '.join(OPERATION_NAMES)}; got {name!r}")


# JSON-schema patterns (the form) for the same grammar the parsers below accept. Each allows
# blank text, which means "not given".
_ISO = r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?"
_RANGE = r"[A-Za-z0-9._-]+:\d+:\d+-\d+"
_PARTITIONS = r"\d+(\s*,\s*\d+)*"
_TOPIC = r"[A-Za-z0-9._-]+"
_CAP = r"[1-9]\d*|[Nn][Oo][Nn][Ee]"
NO_CAP = "none"


def _blank_or(pattern: str) -> str:
    return rf"^\s*({pattern})?\s*$"


def is_blank(value: Any) -> bool:
    """None, empty and whitespace-only text all mean "not given"."""
    return value is None or (isinstance(value, str) and not value.strip())


def _text(value: Any) -> str:
    return str(value).strip()


def parse_whole_number(value: Any, minimum: int | None = None, maximum: int | None = None, example: str = "3") -> int:
    if isinstance(value, bool):
        raise OperationInputError(f"expected a whole number such as {example}, got {value!r}")
    try:
        number = int(_text(value))
    except ValueError:
        raise OperationInputError(f"expected a whole number such as {example}, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise OperationInputError(f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise OperationInputError(f"must be at most {maximum}, got {number}")
    return number


def parse_offset_ranges(value: Any) -> tuple[tuple[TopicPartition, int, int], ...]:
    """``topic:partition:start-end`` items, comma-separated, spaces allowed; ``end`` is exclusive."""
    if is_blank(value):
        return ()
    ranges = []
    for item in _text(value).split(","):
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


def parse_partitions(value: Any) -> tuple[int, ...] | None:
    """Comma-separated partition numbers; blank means every partition (None)."""
    if is_blank(value):
        return None
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    text = _text(value)
    if not re.fullmatch(_PARTITIONS, text):
        raise OperationInputError(
            f"{value!r} is not a list of partition numbers: use comma-separated numbers such as 0,2, or leave it"
            " empty for every partition"
        )
    return tuple(sorted({int(p) for p in text.split(",")}))


def parse_topic(value: Any) -> str | None:
    if is_blank(value):
        return None
    text = _text(value)
    if not TOPIC_NAME.fullmatch(text):
        raise OperationInputError(f"{value!r} is not a Kafka topic name (letters, digits, '.', '_', '-')")
    return text


def parse_timestamp(value: Any) -> datetime | None:
    if is_blank(value):
        return None
    try:
        return parse_datetime(value)
    except ResetError:
        raise OperationInputError(
            f"{value!r} is not a timestamp: use ISO 8601, e.g. 2026-11-21T08:00:00Z (UTC when no offset)"
        ) from None


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


def parse_pipeline(value: Any) -> str:
    text = "" if value is None else str(value)
    if not PIPELINE_NAME.fullmatch(text) or text in {".", ".."}:
        raise OperationInputError(
            f"{value!r} is not a pipeline name: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return text


def parse_reset_mode(value: Any) -> ResetMode:
    try:
        return ResetMode(_text(value))
    except ValueError:
        raise OperationInputError(
            f"{value!r} is not a reset mode: use one of {', '.join(m.value for m in ResetMode)}"
        ) from None


def parse_reset_value(value: Any) -> str | None:
    """Kept as text here: which form it must take depends on the mode (see :func:`reset_value`)."""
    return None if is_blank(value) else _text(value)


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = _text(value).lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise OperationInputError(f"expected true or false, got {value!r}")


def _optional_text(value: Any) -> str | None:
    return None if is_blank(value) else _text(value)


@dataclass(frozen=True)
class Field:
    """One input of the manual operations: how the form shows it, who reads it, how it is parsed."""

    name: str
    title: str
    description: str
    operations: tuple[str, ...]
    parse: Callable[[Any], Any]
    json_type: str = "string"
    default: Any = None
    section: str | None = None
    required: bool = False  # the form insists on a value (no "null" in its type)
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    in_form: bool = True
    cli: str | None = None  # the CLI option, e.g. "--partitions"

    def param_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``airflow.sdk.Param`` for the trigger form."""
        kwargs: dict[str, Any] = {
            "default": self.default,
            "type": self.json_type if self.required else ["null", self.json_type],
            "title": self.title,
            "description": self.description,
        }
        for key in ("section", "pattern", "minimum", "maximum"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        if self.enum is not None:  # jsonschema checks enum apart from type: an optional field lists null too
            kwargs["enum"] = list(self.enum) if self.required else [None, *self.enum]
        return kwargs

    def value(self, raw: Any, label: str | None = None) -> Any:
        """The parsed value; blank means the default. Errors name the field (``label``, default its title)."""
        if is_blank(raw):
            raw = self.default
            if is_blank(raw):
                return None
        try:
            return self.parse(raw)
        except OperationInputError as exc:
            raise OperationInputError(f"{label or self.title}: {exc}") from None


def parse_topics(value: Any) -> tuple[str, ...] | None:
    """Comma-separated topic names; blank means "keep"."""
    if is_blank(value):
        return None
    topics = tuple(dict.fromkeys(t.strip() for t in _text(value).split(",") if t.strip()))
    for topic in topics:
        parse_topic(topic)
    return topics


def parse_cap(value: Any) -> int | str | None:
    """A positive cap, ``"none"`` to remove it, blank to keep it."""
    if is_blank(value):
        return None
    if _text(value).lower() == NO_CAP:
        return NO_CAP
    return parse_whole_number(value, minimum=1, example="100000")


def _enum_text(allowed: tuple[str, ...], value: Any) -> str:
    if _text(value) not in allowed:
        raise OperationInputError(f"expected one of {', '.join(allowed)}, got {value!r}")
    return _text(value)


def _start_policy(value: Any) -> str:
    return _enum_text(tuple(p.value for p in StartPolicy), value)


def _data_loss_policy(value: Any) -> str:
    return _enum_text(tuple(p.value for p in DataLossPolicy), value)


def spec_changes(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``build_spec`` arguments a change-spec request sets (``None`` for a removed cap)."""
    changes: dict[str, Any] = {}
    if values.get("spec_topics"):
        changes["topics"] = values["spec_topics"]
    for name in ("max_records_per_batch", "max_records_per_partition"):
        cap = values.get(f"spec_{name}")
        if cap is not None:
            changes[name] = None if cap == NO_CAP else cap
    for name in ("new_partition_offsets", "on_data_loss"):
        if values.get(f"spec_{name}") is not None:
            changes[name] = values[f"spec_{name}"]
    return changes


def _batch_number(value: Any) -> int:
    return parse_whole_number(value, minimum=1, example="3")


def _max_batches(value: Any) -> int:
    return parse_whole_number(value, minimum=1, maximum=10000, example="10")


FIELDS: tuple[Field, ...] = (
    Field(
        "operation",
        "Operation",
        "What to do with the pipeline: " + "; ".join(f"{op.name}: {op.help}" for op in OPERATIONS) + ".",
        OPERATION_NAMES,
        lambda v: operation(_text(v)).name,
        default="status",
        required=True,
        enum=OPERATION_NAMES,
    ),
    Field(
        "pipeline",
        "Pipeline",
        "The pipeline's name in the ledger.",
        OPERATION_NAMES,
        parse_pipeline,
        default="demo_events",
        required=True,
        pattern=f"^{PIPELINE_NAME.pattern}$",
    ),
    Field(
        "replay_first_batch",
        "Replay: first batch",
        "First batch number to replay (empty: from the first).",
        ("replay",),
        _batch_number,
        json_type="integer",
        section="Replay",
        minimum=1,
    ),
    Field(
        "replay_last_batch",
        "Replay: last batch",
        "Last batch number to replay (empty: up to the newest).",
        ("replay",),
        _batch_number,
        json_type="integer",
        section="Replay",
        minimum=1,
    ),
    Field(
        "replay_batches",
        "--batches",
        "FIRST[-LAST] batch numbers, e.g. 3 or 3-5",
        ("replay",),
        parse_batch_span,
        in_form=False,
        cli="--batches",
    ),
    Field(
        "replay_offset_ranges",
        "Replay: offset ranges",
        "topic:partition:start-end, comma-separated, end exclusive, e.g. orders:0:100-200, orders:1:0-50.",
        ("replay",),
        parse_offset_ranges,
        section="Replay",
        pattern=_blank_or(rf"{_RANGE}(\s*,\s*{_RANGE})*"),
        cli="--offsets",
    ),
    Field(
        "replay_since",
        "Replay: since",
        "Start of a time window of record timestamps, ISO 8601, e.g. 2026-11-21T08:00:00Z.",
        ("replay",),
        parse_timestamp,
        section="Replay",
        pattern=_blank_or(_ISO),
        cli="--since",
    ),
    Field(
        "replay_until",
        "Replay: until",
        "End of the time window, ISO 8601 (empty: now).",
        ("replay",),
        parse_timestamp,
        section="Replay",
        pattern=_blank_or(_ISO),
        cli="--until",
    ),
    Field(
        "replay_output_root",
        "Replay: separate output root",
        "Rebuild under this root instead (empty: rebuild the batches' outputs in place).",
        ("replay",),
        _optional_text,
        section="Replay",
        cli="--output-root",
    ),
    Field(
        "reset_mode",
        "Reset: mode",
        "Where to move the cursor, like kafka-consumer-groups --reset-offsets.",
        ("reset",),
        parse_reset_mode,
        default=ResetMode.TO_LATEST.value,
        section="Reset",
        enum=tuple(m.value for m in ResetMode),
    ),
    Field(
        "reset_value",
        "Reset: value",
        "Offset (to-offset), delta (shift-by) or ISO timestamp (to-datetime); the other modes ignore it.",
        ("reset",),
        parse_reset_value,
        section="Reset",
        pattern=_blank_or(rf"-?\d+|{_ISO}"),
    ),
    Field(
        "reset_topic",
        "Reset: topic",
        "Empty: every topic of the pipeline.",
        ("reset",),
        parse_topic,
        section="Reset",
        pattern=_blank_or(TOPIC_NAME.pattern),
        cli="--topic",
    ),
    Field(
        "reset_partitions",
        "Reset: partitions",
        "Comma-separated partition numbers, e.g. 0,2 (empty: every partition).",
        ("reset",),
        parse_partitions,
        section="Reset",
        pattern=_blank_or(_PARTITIONS),
        cli="--partitions",
    ),
    Field(
        "dry_run",
        "Dry run",
        "Reset, change spec and sweep: show what would change without changing anything.",
        ("reset", "change_spec", "sweep"),
        parse_bool,
        json_type="boolean",
        default=True,
    ),
    Field(
        "catch_up_max_batches",
        "Catch-up: at most this many batches",
        "Between 1 and 10000 (empty: 10).",
        ("catch_up",),
        _max_batches,
        json_type="integer",
        default=10,
        section="Catch-up",
        minimum=1,
        maximum=10000,
        cli="--max-batches",
    ),
    Field(
        "abort_reason",
        "Abort: reason",
        "Recorded in the audit trail (empty: 'aborted by hand').",
        ("abort",),
        _optional_text,
        default="aborted by hand",
        section="Abort",
        cli="--reason",
    ),
    Field(
        "spec_topics",
        "Change spec: topics",
        "The pipeline's topics from now on, comma-separated (empty: keep). Added topics start by the"
        " new-partition policy; removed topics keep their cursors, retired.",
        ("change_spec",),
        parse_topics,
        section="Change spec",
        pattern=_blank_or(rf"{_TOPIC}(\s*,\s*{_TOPIC})*"),
        cli="--topics",
    ),
    Field(
        "spec_max_records_per_batch",
        "Change spec: max records per batch",
        "A positive number, or 'none' for no cap (empty: keep).",
        ("change_spec",),
        parse_cap,
        section="Change spec",
        pattern=_blank_or(_CAP),
        cli="--max-records-per-batch",
    ),
    Field(
        "spec_max_records_per_partition",
        "Change spec: max records per partition",
        "A positive number, or 'none' for no cap (empty: keep).",
        ("change_spec",),
        parse_cap,
        section="Change spec",
        pattern=_blank_or(_CAP),
        cli="--max-records-per-partition",
    ),
    Field(
        "spec_new_partition_offsets",
        "Change spec: where new partitions start",
        "earliest, latest or error (empty: keep).",
        ("change_spec",),
        _start_policy,
        section="Change spec",
        enum=tuple(p.value for p in StartPolicy),
        cli="--new-partition-offsets",
    ),
    Field(
        "spec_on_data_loss",
        "Change spec: on data loss",
        "fail, or skip and record the lost span (empty: keep).",
        ("change_spec",),
        _data_loss_policy,
        section="Change spec",
        enum=tuple(p.value for p in DataLossPolicy),
        cli="--on-data-loss",
    ),
)
FIELDS_BY_NAME: Mapping[str, Field] = {f.name: f for f in FIELDS}


def form_fields() -> tuple[Field, ...]:
    return tuple(f for f in FIELDS if f.in_form)


@dataclass(frozen=True)
class OperationRequest:
    """A validated manual operation: what, on which pipeline, with the parsed values it reads."""

    operation: str
    pipeline: str
    values: Mapping[str, Any]

    def get(self, name: str) -> Any:
        return self.values.get(name)


def parse_request(raw: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> OperationRequest:
    """Validate the form's (or the CLI's) fields for the chosen operation; every problem in one message.

    ``labels`` names fields in messages (the CLI passes its option names); default: the form's titles.
    """
    labels = labels or {}
    op = FIELDS_BY_NAME["operation"].value(raw.get("operation"))
    values: dict[str, Any] = {}
    problems: list[str] = []
    for field in FIELDS:
        if op not in field.operations:
            continue
        try:
            values[field.name] = field.value(raw.get(field.name), labels.get(field.name))
        except OperationInputError as exc:
            problems.append(str(exc))
    if not problems:
        try:
            _check_combination(op, values, labels)
        except OperationInputError as exc:
            problems.append(str(exc))
    if problems:
        raise OperationInputError("; ".join(problems))
    return OperationRequest(op, values["pipeline"], values)


def _check_combination(op: str, values: dict[str, Any], labels: Mapping[str, str]) -> None:
    if op == "replay":
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
    if op == "reset":
        values["reset_value"] = reset_value(
            values["reset_mode"],
            values.get("reset_value"),
            labels.get("reset_value", FIELDS_BY_NAME["reset_value"].title),
        )


def reset_value(mode: ResetMode, text: str | None, label: str = "Reset: value") -> int | datetime | None:
    """The reset value in the form the mode needs (ignored by the modes that take none)."""
    try:
        if mode in (ResetMode.TO_OFFSET, ResetMode.SHIFT_BY):
            if text is None:
                raise OperationInputError(f"{mode.value} needs a whole number, e.g. 42")
            return parse_whole_number(text, minimum=0 if mode is ResetMode.TO_OFFSET else None, example="42")
        if mode is ResetMode.TO_DATETIME:
            if text is None:
                raise OperationInputError("to-datetime needs a timestamp, e.g. 2026-11-21T08:00:00Z")
            return parse_timestamp(text)
        return None  # to-earliest and to-latest read no value
    except OperationInputError as exc:
        raise OperationInputError(f"{label}: {exc}") from None


def reset_request(values: Mapping[str, Any]) -> ResetRequest:
    """A validated reset (the parsed values of :func:`parse_request`) as a :class:`ResetRequest`."""
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
    reset_mode = FIELDS_BY_NAME["reset_mode"].value(mode)
    values = {
        "reset_mode": reset_mode,
        "reset_value": reset_value(reset_mode, FIELDS_BY_NAME["reset_value"].value(value)),
        "reset_topic": FIELDS_BY_NAME["reset_topic"].value(topic),
        "reset_partitions": FIELDS_BY_NAME["reset_partitions"].value(partitions),
    }
    return reset_request(values)
