"""The manual operations and their input fields, defined once for the trigger form, the operator and the CLI.

Each operation is a module of :mod:`airflow_kafka_offsets.core.operations` (its fields, the rules
across them, its typed request); this module builds the registry from them: :data:`OPERATIONS`,
:data:`FIELDS` (with the fields every operation shares) and :func:`parse_request`. Each
:class:`Field` carries its form rendering (JSON schema type, title, section, pattern), the
operations that read it and the parser that turns user text into a value with a message a user
understands (:mod:`airflow_kafka_offsets.core.operation_input`). Empty and blank text mean "not
given" everywhere. Fields that the chosen operation does not read are ignored, so they never
block a run. Adding an operation means adding its module here and its handler module in
:mod:`airflow_kafka_offsets.service.operations`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from airflow_kafka_offsets.core.operation_input import (
    CliInput,
    Field,
    Operation,
    OperationInputError,
    is_blank,
    parse_bool,
    parse_pipeline,
    parse_timestamp,
    parse_topic,
    parse_whole_number,
    text,
)
from airflow_kafka_offsets.core.operations import abort, catch_up, change_spec, replay, reset, status, sweep
from airflow_kafka_offsets.core.operations.change_spec import NO_CAP, parse_cap, parse_topics, spec_changes
from airflow_kafka_offsets.core.operations.replay import ReplaySelection, parse_batch_span, parse_offset_ranges
from airflow_kafka_offsets.core.operations.reset import (
    build_reset_request,
    parse_partitions,
    parse_reset_mode,
    parse_reset_value,
    reset_request,
    reset_value,
)
from airflow_kafka_offsets.core.spec import PIPELINE_NAME

__all__ = [
    "CLI_INPUTS",
    "FIELDS",
    "FIELDS_BY_NAME",
    "NO_CAP",
    "OPERATIONS",
    "OPERATION_NAMES",
    "Field",
    "Operation",
    "OperationInputError",
    "OperationRequest",
    "ReplaySelection",
    "build_reset_request",
    "form_fields",
    "is_blank",
    "operation",
    "parse_batch_span",
    "parse_bool",
    "parse_cap",
    "parse_offset_ranges",
    "parse_partitions",
    "parse_pipeline",
    "parse_request",
    "parse_reset_mode",
    "parse_reset_value",
    "parse_timestamp",
    "parse_topic",
    "parse_topics",
    "parse_whole_number",
    "reset_request",
    "reset_value",
    "spec_changes",
]

# In the order the form, the CLI and the help list them.
MODULES: tuple[ModuleType, ...] = (status, replay, reset, catch_up, abort, change_spec, sweep)
OPERATIONS: tuple[Operation, ...] = tuple(m.OPERATION for m in MODULES)
OPERATION_NAMES: tuple[str, ...] = tuple(op.name for op in OPERATIONS)
# Rules across an operation's fields, run once each field parsed.
CHECKS: Mapping[str, Callable[[dict[str, Any], Mapping[str, str]], None]] = {
    m.OPERATION.name: m.check for m in MODULES if hasattr(m, "check")
}
# Operations' own command-line options (core.operation_input.CliInput), where they have any.
CLI_INPUTS: Mapping[str, CliInput] = {m.OPERATION.name: m.CLI for m in MODULES if hasattr(m, "CLI")}


def operation(name: str) -> Operation:
    for op in OPERATIONS:
        if op.name == name:
            return op
    raise OperationInputError(f"operation must be one of {', '.join(OPERATION_NAMES)}; got {name!r}")


OPERATION_FIELD = Field(
    "operation",
    "Operation",
    "What to do with the pipeline: " + "; ".join(f"{op.name}: {op.help}" for op in OPERATIONS) + ".",
    OPERATION_NAMES,
    lambda v: operation(text(v)).name,
    default="status",
    required=True,
    enum=OPERATION_NAMES,
)
PIPELINE_FIELD = Field(
    "pipeline",
    "Pipeline",
    "The pipeline's name in the ledger.",
    OPERATION_NAMES,
    parse_pipeline,
    default="demo_events",
    required=True,
    pattern=f"^{PIPELINE_NAME.pattern}$",
)
DRY_RUN_FIELD = Field(
    "dry_run",
    "Dry run",
    "Reset, change spec and sweep: show what would change without changing anything.",
    (reset.OPERATION.name, change_spec.OPERATION.name, sweep.OPERATION.name),
    parse_bool,
    json_type="boolean",
    default=True,
)
FIELDS: tuple[Field, ...] = (
    OPERATION_FIELD,
    PIPELINE_FIELD,
    *replay.FIELDS,
    *reset.FIELDS,
    DRY_RUN_FIELD,
    *catch_up.FIELDS,
    *abort.FIELDS,
    *change_spec.FIELDS,
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
    op = OPERATION_FIELD.value(raw.get("operation"))
    values: dict[str, Any] = {}
    problems: list[str] = []
    for field in FIELDS:
        if op not in field.operations:
            continue
        try:
            values[field.name] = field.value(raw.get(field.name), labels.get(field.name))
        except OperationInputError as exc:
            problems.append(str(exc))
    if not problems and op in CHECKS:
        try:
            CHECKS[op](values, labels)
        except OperationInputError as exc:
            problems.append(str(exc))
    if problems:
        raise OperationInputError("; ".join(problems))
    return OperationRequest(op, values["pipeline"], values)
