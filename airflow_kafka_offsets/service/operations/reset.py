"""reset: move a pipeline's cursors, recorded as a batch of kind 'reset' so every offset stays accounted for."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.merge import rewind_refusal
from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.reset import OPERATION, reset_request
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest, plan_reset
from airflow_kafka_offsets.core.tables import render_table
from airflow_kafka_offsets.errors import BatchStateError, MergeOperationRefusedError
from airflow_kafka_offsets.service.consumer_group import mirror_to_consumer_group
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations.result import OperationResult, change_heading

__all__ = ["OPERATION", "ResetOutcome", "handle", "reset_offsets"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResetOutcome:
    pipeline: str
    applied: bool
    batch_id: int | None
    table: str
    changes: tuple[dict[str, Any], ...]


def reset_offsets(ctx: OperationContext, pipeline: str, request: ResetRequest, dry_run: bool = True) -> ResetOutcome:
    """Move a pipeline's cursors; refused while a batch is planned; dry run by default.

    The applied reset is a committed batch of kind 'reset' whose ranges record
    the skipped span (forward) or open a new epoch (rewind), so the ledger
    still accounts for every offset.
    """
    kafka = ctx.kafka
    with ctx.ledger.transaction() as tx:
        tx.lock_existing_pipeline(pipeline)
        spec = tx.pipeline_spec(pipeline)
        planned = tx.planned_batch_id(pipeline)
        if planned is not None:
            raise BatchStateError(
                f"pipeline {pipeline!r} has batch {planned} planned: let it commit (or abort it) before a reset"
            )
        cursors = tx.cursors(pipeline)
        offsets = kafka.offsets(spec.topics)
        at_time = None
        if request.mode is ResetMode.TO_DATETIME and request.timestamp is not None:
            at_time = kafka.offsets_for_time(sorted(tp for tp in offsets if tp.topic in spec.topics), request.timestamp)
        resets = plan_reset(spec, cursors, offsets, request, at_time)
        rewound = [f"{r.topic}-{r.partition}" for r in resets if r.before is not None and r.after < r.before]
        if spec.sink.merge is not None and rewound:
            raise MergeOperationRefusedError(rewind_refusal(pipeline, rewound))
        changes = tuple(
            {"topic": r.topic, "partition": r.partition, "before": r.before, "after": r.after, "change": r.change}
            for r in resets
        )
        table = render_table(
            ["partition", "before", "after", "change"],
            [[f"{c['topic']}-{c['partition']}", c["before"], c["after"], c["change"]] for c in changes],
        )
        if dry_run or all(r.before == r.after for r in resets):
            log.info(
                "pipeline %s: reset %s: %s",
                pipeline,
                request.mode.value,
                "dry run, nothing changed" if dry_run else "changes nothing",
            )
            return ResetOutcome(pipeline, False, None, table, changes)
        detail = {
            "mode": request.mode.value,
            "offset": request.offset,
            "timestamp": request.timestamp.isoformat() if request.timestamp else None,
            "changes": list(changes),
        }
        if ctx.approval is not None:
            ctx.approval.check("reset", pipeline, table)
        batch_id = tx.apply_reset(pipeline, resets, detail, ctx.actor)
    log.info("pipeline %s: reset %s applied as batch %s", pipeline, request.mode.value, batch_id)
    return ResetOutcome(pipeline, True, batch_id, table, changes)


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    reset = reset_request(request.values)
    dry_run = bool(request.get("dry_run"))
    outcome = reset_offsets(ctx, request.pipeline, reset, dry_run=dry_run)
    if outcome.applied:
        mirror_to_consumer_group(ctx.ledger, ctx.kafka, request.pipeline)
    head = change_heading(f"applied as batch {outcome.batch_id}" if outcome.applied else None, dry_run)
    data = {
        "applied": outcome.applied,
        "dry_run": dry_run,
        "batch_id": outcome.batch_id,
        "changes": list(outcome.changes),
    }
    return OperationResult(data, f"reset {request.pipeline} {reset.mode.value}: {head}\n{outcome.table}")
