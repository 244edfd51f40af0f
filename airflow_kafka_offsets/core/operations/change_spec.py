"""change-spec: change the pipeline's topics, caps or policies on purpose (dry run first)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from airflow_kafka_offsets.core.operation_input import (
    Field,
    Operation,
    blank_or,
    enum_text,
    is_blank,
    parse_topic,
    parse_whole_number,
    text,
)
from airflow_kafka_offsets.core.options import OptionInfo, declared
from airflow_kafka_offsets.core.plan_options import PlanOptions

OPERATION = Operation(
    "change_spec",
    "Change spec",
    "change the pipeline's topics, caps or policies on purpose (a dry run unless told to apply it)",
)
_TOPIC = r"[A-Za-z0-9._-]+"
_CAP = r"[1-9]\d*|[Nn][Oo][Nn][Ee]"
NO_CAP = "none"


def parse_topics(value: Any) -> tuple[str, ...] | None:
    """Comma-separated topic names; blank means "keep"."""
    if is_blank(value):
        return None
    topics = tuple(dict.fromkeys(t.strip() for t in text(value).split(",") if t.strip()))
    for topic in topics:
        parse_topic(topic)
    return topics


def parse_cap(value: Any) -> int | str | None:
    """A positive cap, ``"none"`` to remove it, blank to keep it."""
    if is_blank(value):
        return None
    if text(value).lower() == NO_CAP:
        return NO_CAP
    return parse_whole_number(value, minimum=1, example="100000")


def _spec_field(o: OptionInfo, label: str, description: str) -> Field:
    """A pipeline option the form changes: one of its fixed values, or a cap (a number or "none"); blank keeps
    the current value."""
    if o.choices:
        return OPERATION.field(
            f"spec_{o.name}", label, description, partial(enum_text, o.choices), enum=o.choices, cli=o.cli
        )
    return OPERATION.field(f"spec_{o.name}", label, description, parse_cap, pattern=blank_or(_CAP), cli=o.cli)


# The pipeline options this form changes: those declared with a form label.
CHANGEABLE: tuple[OptionInfo, ...] = tuple(o for o in declared(PlanOptions) if o.form)
FIELDS: tuple[Field, ...] = (
    OPERATION.field(
        "spec_topics",
        "topics",
        "The pipeline's topics from now on, comma-separated (empty: keep). Added topics start by the"
        " new-partition policy; removed topics keep their cursors, retired.",
        parse_topics,
        pattern=blank_or(rf"{_TOPIC}(\s*,\s*{_TOPIC})*"),
        cli="--topics",
    ),
    *(_spec_field(o, *o.form) for o in CHANGEABLE if o.form),
)


def spec_changes(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``build_spec`` arguments a change-spec request sets (``None`` for a removed cap)."""
    changes: dict[str, Any] = {}
    if values.get("spec_topics"):
        changes["topics"] = values["spec_topics"]
    for o in CHANGEABLE:
        value = values.get(f"spec_{o.name}")
        if value is not None:
            changes[o.name] = None if value == NO_CAP and not o.choices else value
    return changes
