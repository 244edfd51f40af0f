"""abort: give up the planned batch and take back anything of it a reader could see."""

from __future__ import annotations

import logging

from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.abort import OPERATION
from airflow_kafka_offsets.core.tables import abort_table
from airflow_kafka_offsets.errors import BatchStateError
from airflow_kafka_offsets.service.attempts import discard_ended_attempts
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations.result import OperationResult

__all__ = ["OPERATION", "abort_planned_batch", "handle"]

log = logging.getLogger(__name__)


def abort_planned_batch(ctx: OperationContext, pipeline: str, reason: str) -> int:
    """Give up the planned batch and take back anything of it a reader could see.

    A crash between publish and commit leaves the batch's output directory published; it is
    moved back into staging inside the abort's transaction (so a failed abort leaves the batch
    planned and committable), then the staging of its ended attempts is removed. A live attempt
    removes its own when it ends.
    """
    ledger, actor = ctx.ledger, ctx.actor
    with ledger.transaction() as tx:
        tx.lock_existing_pipeline(pipeline)
        planned = tx.planned_batch_id(pipeline)
        if planned is None:
            raise BatchStateError(f"pipeline {pipeline!r} has no planned batch to abort")
        plan = tx.batch(pipeline, planned).plan
        if ctx.approval is not None:
            ctx.approval.check("abort", pipeline, abort_table(plan))
        tx.abort_batch(pipeline, planned, reason, actor)
        sink = ctx.sinks.for_spec(ledger, tx.pipeline_spec(pipeline))
        withdrawn = sink.withdraw(tx, tx.pipeline_uid(pipeline), plan)
        if withdrawn:
            tx.audit(pipeline, planned, "withdrawn", {"output_uri": plan.output_uri}, actor)
    if withdrawn:
        log.info(
            "pipeline %s: the published output of aborted batch %s was withdrawn from %s",
            pipeline,
            planned,
            plan.output_uri,
        )
        sink.discard_attempt(withdrawn)
    discard_ended_attempts(ledger, sink, pipeline, planned)
    return planned


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    reason = request.get("abort_reason")
    batch_id = abort_planned_batch(ctx, request.pipeline, reason)
    return OperationResult(
        {"aborted": batch_id, "reason": reason}, f"aborted batch {batch_id} of {request.pipeline}: {reason}"
    )
