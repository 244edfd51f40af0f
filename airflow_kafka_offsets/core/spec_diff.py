"""Differences between a pipeline's stored spec and another one, and which of them may be applied.

Pure: the ledger refuses a run whose spec differs from the stored one (listing
these differences), and the spec-change operation applies them on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from airflow_kafka_offsets.core.model import PipelineSpec, SinkSpec
from airflow_kafka_offsets.core.routing import rerouting_problems
from airflow_kafka_offsets.errors import InvalidPipelineSpecError

CHANGE_OPERATION = "change-spec"


@dataclass(frozen=True)
class FieldChange:
    """One field of the spec, before and after (JSON values, as the ledger stores them)."""

    field: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.field}: {_show(self.before)} -> {_show(self.after)}"


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    return "null" if value is None else str(value)


@dataclass(frozen=True)
class SpecDiff:
    """What changes from ``before`` to ``after``; topics also as the sets added and removed."""

    pipeline: str
    changes: tuple[FieldChange, ...]
    added_topics: tuple[str, ...]
    removed_topics: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(c.field for c in self.changes)

    def lines(self) -> tuple[str, ...]:
        """One line per changed field, topics spelled out as additions and removals."""
        out = []
        for change in self.changes:
            if change.field == "topics":
                parts = [f"adds {', '.join(self.added_topics)}"] if self.added_topics else []
                parts += [f"removes {', '.join(self.removed_topics)}"] if self.removed_topics else []
                out.append(f"{change} ({'; '.join(parts)})")
            else:
                out.append(str(change))
        return tuple(out)


def diff_specs(before: PipelineSpec, after: PipelineSpec) -> SpecDiff:
    """Every field that differs, in the order of :meth:`PipelineSpec.to_json`."""
    if before.name != after.name:
        raise InvalidPipelineSpecError(
            f"cannot compare pipeline {before.name!r} with pipeline {after.name!r}: a pipeline's name never changes"
        )
    old, new = before.to_json(), after.to_json()
    changes = tuple(FieldChange(key, old.get(key), new.get(key)) for key in new if old.get(key) != new.get(key))
    return SpecDiff(
        pipeline=before.name,
        changes=changes,
        added_topics=tuple(sorted(set(after.topics) - set(before.topics))),
        removed_topics=tuple(sorted(set(before.topics) - set(after.topics))),
    )


def _sink_refusals(before: Any, after: Any, committed_topics: Sequence[str]) -> list[str]:
    """A sink of many tables may gain routes (a new topic, a new table); nothing else of a sink changes."""
    old, new = SinkSpec.from_json(before), SinkSpec.from_json(after)
    if old.routes is not None and new.routes is not None and replace(old, routes=None) == replace(new, routes=None):
        return [f"the sink's routes: {p}" for p in rerouting_problems(old.routes, new.routes, committed_topics)]
    return [
        "the sink cannot change: committed batches are in the old one; start a new pipeline (another name) "
        "to write to another format or table (a sink of many tables may only gain routes)"
    ]


def change_refusals(diff: SpecDiff, planned_batch: int | None, committed_topics: Sequence[str] = ()) -> tuple[str, ...]:
    """Why ``diff`` cannot be applied now; empty when it can.

    The output root never changes: batch locations are a function of pipeline and batch
    number under one root, and replays rebuild them in place. While a batch is planned, its
    ranges are fixed and it is read with the stored decoding, so removing a topic and changing
    the decoding wait until it is committed or aborted; every other change applies from the
    next batch. ``committed_topics``: the topics committed batches read records of (a sink of many
    tables keeps their routes).
    """
    refusals = []
    if "output_root" in diff.fields:
        refusals.append(
            "output_root cannot change: committed batches live under the old root and replays rebuild them "
            "there; start a new pipeline (another name) to write elsewhere"
        )
    for change in diff.changes:
        if change.field == "sink":
            refusals += _sink_refusals(change.before, change.after, committed_topics)
    if planned_batch is not None:
        if diff.removed_topics:
            refusals.append(
                f"batch {planned_batch} is planned and reads {', '.join(diff.removed_topics)}: let it commit "
                "(or abort it) before removing a topic"
            )
        if "decode" in diff.fields:
            refusals.append(
                f"batch {planned_batch} is planned and will be decoded with the stored json_schema: let it commit "
                "(or abort it) before changing the decoding"
            )
    return tuple(refusals)


def mismatch_message(diff: SpecDiff) -> str:
    """Why a run with another spec is refused, what differs, and how to change the spec on purpose."""
    listed = "\n".join(f"  {line}" for line in diff.lines())
    return (
        f"pipeline {diff.pipeline!r} is stored in the ledger with another spec than this run's "
        f"(stored -> this run):\n{listed}\n"
        "Nothing was planned. If the change is intended, apply it with the pipeline's "
        f"'{CHANGE_OPERATION}' operation (dry run first, then execute; it is audited) and run again; "
        "if another DAG uses this pipeline name by mistake, give one of them another name"
    )
