"""change-spec: change the pipeline's topics, caps or policies on purpose (dry run first)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from functools import partial
from typing import Any

from airflow_kafka_offsets.core.model import DataLossPolicy, StartPolicy
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


def _cap_field(per: str) -> Field:
    """The two caps, per batch and per partition: one input each, read alike."""
    return OPERATION.field(
        f"spec_max_records_per_{per}",
        f"max records per {per}",
        "A positive number, or 'none' for no cap (empty: keep).",
        parse_cap,
        pattern=blank_or(_CAP),
        cli=f"--max-records-per-{per}",
    )


def _policy_field(name: str, label: str, description: str, policy: type[Enum]) -> Field:
    """The two policies: one of the enum's values, or blank to keep the current one."""
    allowed = tuple(str(p.value) for p in policy)
    return OPERATION.field(
        f"spec_{name}",
        label,
        description,
        partial(enum_text, allowed),
        enum=allowed,
        cli=f"--{name.replace('_', '-')}",
    )


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
    _cap_field("batch"),
    _cap_field("partition"),
    _policy_field(
        "new_partition_offsets", "where new partitions start", "earliest, latest or error (empty: keep).", StartPolicy
    ),
    _policy_field(
        "on_data_loss", "on data loss", "fail, or skip and record the lost span (empty: keep).", DataLossPolicy
    ),
)


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
