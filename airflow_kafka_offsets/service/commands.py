"""One dispatcher for the manual operations, shared by the CLI and the operator.

Input arrives already validated as an :class:`~airflow_kafka_offsets.core.operation_fields.OperationRequest`;
each handler returns the same data (for JSON and XCom) and text (for a terminal or a task log)
whoever called it. A new operation is an entry in ``core.operation_fields.OPERATIONS`` plus its
handler in ``HANDLERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.operation_fields import OperationRequest, reset_request, spec_changes
from airflow_kafka_offsets.core.spec import updated_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service import operations as ops
from airflow_kafka_offsets.service.decoding import RegistryClients
from airflow_kafka_offsets.service.spec_change import change_spec
from airflow_kafka_offsets.service.sweep import sweep

Submit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class OperationContext:
    """What a handler works with. ``submit`` and ``kafka_properties`` only for operations that use Spark;
    ``registry`` for those that plan batches of Avro pipelines (catch-up)."""

    ledger: Ledger
    kafka: KafkaOffsetsClient
    actor: Mapping[str, Any]
    submit: Submit | None = None
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    registry: RegistryClients | None = None


@dataclass(frozen=True)
class OperationResult:
    data: dict[str, Any]
    text: str


def _status(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    status = ops.pipeline_status(ctx.ledger, ctx.kafka, request.pipeline)
    return OperationResult(status, ops.render_status(status))


def _reset(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    reset = reset_request(request.values)
    dry_run = bool(request.get("dry_run"))
    outcome = ops.reset_offsets(ctx.ledger, ctx.kafka, request.pipeline, reset, ctx.actor, dry_run=dry_run)
    if outcome.applied:
        ops.mirror_to_consumer_group(ctx.ledger, ctx.kafka, request.pipeline)
        head = f"applied as batch {outcome.batch_id}"
    elif dry_run:
        head = "dry run, nothing changed (turn dry run off, or add --execute, to apply)"
    else:
        head = "nothing to change"
    data = {
        "applied": outcome.applied,
        "dry_run": dry_run,
        "batch_id": outcome.batch_id,
        "changes": list(outcome.changes),
    }
    return OperationResult(data, f"reset {request.pipeline} {reset.mode.value}: {head}\n{outcome.table}")


def _abort(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    reason = request.get("abort_reason")
    batch_id = ops.abort_planned_batch(ctx.ledger, request.pipeline, reason, ctx.actor)
    return OperationResult(
        {"aborted": batch_id, "reason": reason}, f"aborted batch {batch_id} of {request.pipeline}: {reason}"
    )


def _replay(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    assert ctx.submit is not None, "replay uses Spark"
    selection = ops.ReplaySelection(
        first_batch=request.get("replay_first_batch"),
        last_batch=request.get("replay_last_batch"),
        offset_ranges=request.get("replay_offset_ranges") or (),
        since=request.get("replay_since"),
        until=request.get("replay_until"),
    )
    batch_ids = ops.resolve_replay(ctx.ledger, ctx.kafka, request.pipeline, selection)
    target = request.get("replay_output_root")
    outputs = [
        ops.replay_batch(ctx.ledger, request.pipeline, b, ctx.submit, ctx.kafka_properties, ctx.actor, target)
        for b in batch_ids
    ]
    return OperationResult(
        {"replayed": batch_ids, "outputs": outputs},
        "\n".join(f"replayed batch {b} -> {o}" for b, o in zip(batch_ids, outputs)),
    )


def _catch_up(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    assert ctx.submit is not None, "catch-up uses Spark"
    outcome = ops.catch_up(
        ctx.ledger,
        request.pipeline,
        ctx.kafka.offsets,
        ctx.submit,
        ctx.kafka_properties,
        ctx.actor,
        request.get("catch_up_max_batches"),
        after_commit=lambda: ops.mirror_to_consumer_group(ctx.ledger, ctx.kafka, request.pipeline),
        registry=ctx.registry,
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
    outcome = change_spec(ctx.ledger, ctx.kafka, request.pipeline, new_spec, ctx.actor, dry_run=dry_run)
    if outcome.applied:
        head = "applied: update the DAG that plans this pipeline to match"
    elif dry_run and outcome.changes:
        head = "dry run, nothing changed (turn dry run off, or add --execute, to apply)"
    else:
        head = "nothing to change"
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
    sink = ops.pipeline_sink(ctx.ledger, request.pipeline)
    outcome = sweep(ctx.ledger, sink, request.pipeline, dry_run=dry_run, actor=ctx.actor)
    head = (
        "dry run, nothing removed (turn dry run off, or add --execute, to apply)"
        if dry_run
        else f"removed {len(outcome.items)} location(s)"
    )
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
