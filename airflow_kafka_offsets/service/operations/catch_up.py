"""catch-up: drain a backlog as a sequence of capped batches in one run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from airflow_kafka_offsets.core.model import PipelineSpec
from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.catch_up import OPERATION
from airflow_kafka_offsets.core.planner import partition_lag
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.consumer_group import mirror_to_consumer_group
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.decoding import next_decode
from airflow_kafka_offsets.service.operations.result import OperationResult
from airflow_kafka_offsets.service.plan import OffsetsSource, plan_batch
from airflow_kafka_offsets.service.read import run_batch

__all__ = ["OPERATION", "CatchUpOutcome", "catch_up", "handle", "lag_left"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatchUpOutcome:
    batches: int
    records: int
    lag_left: int


def catch_up(
    ctx: OperationContext, pipeline: str, max_batches: int, after_commit: Callable[[], object] | None = None
) -> CatchUpOutcome:
    """Drain a backlog as a sequence of capped batches (the pipeline's caps) in one run.

    An Avro pipeline resolves each batch's reader schema through ``ctx.registry`` (refused without it)."""
    if max_batches < 1:
        raise InvalidPipelineSpecError(f"max_batches must be at least 1, got {max_batches}")
    ledger, actor, offsets_source, submit = ctx.ledger, ctx.actor, ctx.kafka.offsets, ctx.spark("catch-up")
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
    sink = ctx.sinks.for_spec(ledger, spec)
    done = records = 0
    while done < max_batches:
        decode = next_decode(ledger, spec, sink, ctx.registry)  # the sink checked before each plan
        outcome = plan_batch(ledger, spec, offsets_source, sink, actor, decode)
        if outcome.plan is None:
            break
        run_batch(ledger, sink, outcome.plan, submit, ctx.kafka_properties, actor, offsets_source=offsets_source)
        records += commit_batch(ledger, sink, pipeline, outcome.plan.batch_id, actor).records
        done += 1
        if after_commit:
            after_commit()
        lag = lag_left(ledger, spec, offsets_source)
        log.info(
            "catch-up %s: %s/%s batches, %s records, lag left %s records", pipeline, done, max_batches, records, lag
        )
    return CatchUpOutcome(done, records, lag_left(ledger, spec, offsets_source))


def lag_left(ledger: Ledger, spec: PipelineSpec, offsets_source: OffsetsSource) -> int:
    cursors = ledger.cursors(spec.name)
    return sum(partition_lag(cursors.get(tp), o) for tp, o in offsets_source(spec.topics).items())


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    outcome = catch_up(
        ctx,
        request.pipeline,
        request.get("catch_up_max_batches"),
        after_commit=lambda: mirror_to_consumer_group(ctx.ledger, ctx.kafka, request.pipeline),
    )
    data = {"batches": outcome.batches, "records": outcome.records, "lag_left": outcome.lag_left}
    return OperationResult(
        data,
        f"catch-up {request.pipeline}: {outcome.batches} batches, {outcome.records} records,"
        f" lag left {outcome.lag_left}",
    )
