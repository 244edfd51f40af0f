"""One dispatcher for the manual operations, shared by the CLI and the operator.

Input arrives already validated as an :class:`~airflow_kafka_offsets.core.operation_fields.OperationRequest`;
each handler returns the same data (for JSON and XCom) and text (for a terminal or a task log)
whoever called it. A new operation is a module of ``core.operations`` (registered in
``core.operation_fields``) plus its handler in ``HANDLERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.change_spec import spec_changes
from airflow_kafka_offsets.core.operations.replay import selection
from airflow_kafka_offsets.core.operations.reset import reset_request
from airflow_kafka_offsets.core.spec import updated_spec
from airflow_kafka_offsets.service import operations as ops
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.readable import refuse_deleted_replay
from airflow_kafka_offsets.service.spec_change import change_spec
from airflow_kafka_offsets.service.sweep import sweep


@dataclass(frozen=True)
class OperationResult:
    data: dict[str, Any]
    text: str


def _dry_run_heading(nothing: str = "changed") -> str:
    return f"dry run, nothing {nothing} (turn dry run off, or add --execute, to apply)"


def _change_heading(applied: str | None, dry_run: bool) -> str:
    """The first line of a change's text: what was applied, else a dry run's or "nothing to change"."""
    if applied is not None:
        return applied
    return _dry_run_heading() if dry_run else "nothing to change"


def _status(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    status = ops.pipeline_status(ctx, request.pipeline)
    return OperationResult(status, ops.render_status(status))


def _reset(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    reset = reset_request(request.values)
    dry_run = bool(request.get("dry_run"))
    outcome = ops.reset_offsets(ctx, request.pipeline, reset, dry_run=dry_run)
    if outcome.applied:
        ops.mirror_to_consumer_group(ctx.ledger, ctx.kafka, request.pipeline)
    head = _change_heading(f"applied as batch {outcome.batch_id}" if outcome.applied else None, dry_run)
    data = {
        "applied": outcome.applied,
        "dry_run": dry_run,
        "batch_id": outcome.batch_id,
        "changes": list(outcome.changes),
    }
    return OperationResult(data, f"reset {request.pipeline} {reset.mode.value}: {head}\n{outcome.table}")


def _abort(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    reason = request.get("abort_reason")
    batch_id = ops.abort_planned_batch(ctx, request.pipeline, reason)
    return OperationResult(
        {"aborted": batch_id, "reason": reason}, f"aborted batch {batch_id} of {request.pipeline}: {reason}"
    )


def _replay(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    ctx.spark("replay")
    batch_ids = ops.resolve_replay(ctx.ledger, ctx.kafka, request.pipeline, selection(request.values))
    refuse_deleted_replay(ctx.ledger, ctx.kafka.offsets, request.pipeline, batch_ids)  # all, before any Spark job
    target = request.get("replay_output_root")
    outputs = [ops.replay_batch(ctx, request.pipeline, b, target) for b in batch_ids]
    return OperationResult(
        {"replayed": batch_ids, "outputs": outputs},
        "\n".join(f"replayed batch {b} -> {o}" for b, o in zip(batch_ids, outputs)),
    )


def _catch_up(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    outcome = ops.catch_up(
        ctx,
        request.pipeline,
        request.get("catch_up_max_batches"),
        after_commit=lambda: ops.mirror_to_consumer_group(ctx.ledger, ctx.kafka, request.pipeline),
    )
    data = {"batches": outcome.batches, "records": outcome.records, "lag_left": outcome.lag_left}
    return OperationResult(
        data,
        f"catch-up {request.pipeline}: {outcome.batches} batches, {outcome.records} records,"
        f" lag left {outcome.lag_left}",
    )


def _change_spec(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    dry_run = bool(request.get("dry_run"))
    with ctx.ledger.transaction() as tx:
        stored = tx.pipeline_spec(request.pipeline)
    new_spec = updated_spec(stored, spec_changes(request.values))
    outcome = change_spec(ctx, request.pipeline, new_spec, dry_run=dry_run)
    applied = "applied: update the DAG that plans this pipeline to match" if outcome.applied else None
    head = _change_heading(applied, dry_run and bool(outcome.changes))
    data = {
        "applied": outcome.applied,
        "dry_run": dry_run,
        "changes": [{"field": c.field, "before": c.before, "after": c.after} for c in outcome.changes],
        "spec": new_spec.to_json(),
        "added_partitions": [
            {"topic": tp.topic, "partition": tp.partition, "starts_at": at, "how": how}
            for tp, at, how in outcome.starts
        ],
        "retired_cursors": [{"topic": tp.topic, "partition": tp.partition, "cursor": at} for tp, at in outcome.retired],
    }
    return OperationResult(data, f"change-spec {request.pipeline}: {head}\n{outcome.table}")


def _sweep(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    dry_run = bool(request.get("dry_run"))
    sink = ctx.sinks.for_pipeline(ctx.ledger, request.pipeline)
    outcome = sweep(ctx.ledger, sink, request.pipeline, dry_run=dry_run, actor=ctx.actor)
    head = _dry_run_heading("removed") if dry_run else f"removed {len(outcome.items)} location(s)"
    return OperationResult(outcome.to_json(), f"sweep {request.pipeline}: {head}\n{outcome.table()}")


HANDLERS: Mapping[str, Callable[[OperationRequest, OperationContext], OperationResult]] = {
    "status": _status,
    "replay": _replay,
    "reset": _reset,
    "catch_up": _catch_up,
    "abort": _abort,
    "change_spec": _change_spec,
    "sweep": _sweep,
}


def run_operation(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    return HANDLERS[request.operation](request, ctx)
