"""How one input of the manual operations is defined and read: :class:`Field` (its form rendering,
who reads it, its parser) and the parsers that several operations share.

Empty and blank text mean "not given" everywhere: the field's default, or "all" where the
description says so. Messages name what was expected, so that a user can fix the input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.resets import ResetError, parse_datetime
from airflow_kafka_offsets.core.spec import PIPELINE_NAME, TOPIC_NAME
from airflow_kafka_offsets.core.values import FALSE_WORDS, TRUE_WORDS
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


class OperationInputError(InvalidPipelineSpecError):
    """A manual operation's input (form field or CLI option) is not valid."""


@dataclass(frozen=True)
class Operation:
    name: str
    title: str
    help: str
    uses_spark: bool = False

    def field(self, name: str, label: str, description: str, parse: Callable[[Any], Any], **form: Any) -> Field:
        """A field only this operation reads, shown in its own section of the form as "<title>: <label>"."""
        return Field(name, f"{self.title}: {label}", description, (self.name,), parse, section=self.title, **form)


# One command-line argument: its flags and ``ArgumentParser.add_argument`` keywords.
CliOption = tuple[tuple[str, ...], Mapping[str, Any]]


@dataclass(frozen=True)
class CliInput:
    """An operation's own command-line options, for fields a shell gives better than one option each
    (``reset --to-offset 42`` rather than a mode and a value): the options, and ``read``, which turns
    what was typed (argparse's values by ``dest``) into the fields' raw values and the option names
    that messages about them use."""

    options: tuple[CliOption, ...]
    read: Callable[[Mapping[str, Any]], tuple[dict[str, Any], dict[str, str]]]


# JSON-schema patterns (the form) for the same grammar the parsers accept. Each allows blank text,
# which means "not given".
ISO = r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?"


def blank_or(pattern: str) -> str:
    return rf"^\s*({pattern})?\s*$"


def is_blank(value: Any) -> bool:
    """None, empty and whitespace-only text all mean "not given"."""
    return value is None or (isinstance(value, str) and not value.strip())


def text(value: Any) -> str:
    return str(value).strip()


def parse_whole_number(value: Any, minimum: int | None = None, maximum: int | None = None, example: str = "3") -> int:
    if isinstance(value, bool):
        raise OperationInputError(f"expected a whole number such as {example}, got {value!r}")
    try:
        number = int(text(value))
    except ValueError:
        raise OperationInputError(f"expected a whole number such as {example}, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise OperationInputError(f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise OperationInputError(f"must be at most {maximum}, got {number}")
    return number


def parse_topic(value: Any) -> str | None:
    if is_blank(value):
        return None
    name = text(value)
    if not TOPIC_NAME.fullmatch(name):
        raise OperationInputError(f"{value!r} is not a Kafka topic name (letters, digits, '.', '_', '-')")
    return name


def parse_timestamp(value: Any) -> datetime | None:
    if is_blank(value):
        return None
    try:
        return parse_datetime(value)
    except ResetError:
        raise OperationInputError(
            f"{value!r} is not a timestamp: use ISO 8601, e.g. 2026-11-21T08:00:00Z (UTC when no offset)"
        ) from None


def parse_pipeline(value: Any) -> str:
    name = "" if value is None else str(value)
    if not PIPELINE_NAME.fullmatch(name) or name in {".", ".."}:
        raise OperationInputError(
            f"{value!r} is not a pipeline name: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = text(value).lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise OperationInputError(f"expected true or false, got {value!r}")


def optional_text(value: Any) -> str | None:
    return None if is_blank(value) else text(value)


def enum_text(allowed: tuple[str, ...], value: Any) -> str:
    if text(value) not in allowed:
        raise OperationInputError(f"expected one of {', '.join(allowed)}, got {value!r}")
    return text(value)


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


def field_named(fields: tuple[Field, ...], name: str) -> Field:
    (found,) = (f for f in fields if f.name == name)
    return found
