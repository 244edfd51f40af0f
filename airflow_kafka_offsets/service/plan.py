"""Plan a batch: write its exact offset ranges to the ledger before any work (I2), or find the plan
an earlier run wrote. The first of a batch's three steps (then :mod:`~airflow_kafka_offsets.service.read`
and :mod:`~airflow_kafka_offsets.service.commit`); operators and the CLI are thin wrappers over them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import (
    BatchPlan,
    BatchState,
    DecodeSpec,
    PipelineSpec,
)
from airflow_kafka_offsets.core.planner import has_work, new_partitions, plan_ranges
from airflow_kafka_offsets.core.tables import LoggedPartitionTable
from airflow_kafka_offsets.errors import BatchStateError
from airflow_kafka_offsets.ledger import describe_actor
from airflow_kafka_offsets.ledger.port import LedgerPort
from airflow_kafka_offsets.service.faults import crash_point
from airflow_kafka_offsets.service.readable import OffsetsSource
from airflow_kafka_offsets.sinks import Sink

log = logging.getLogger(__name__)

# OffsetsSource (service/readable.py): re-exported, where callers of plan_batch have found it
__all__ = ["OffsetsSource", "PlanOutcome", "load_batch", "plan_batch"]


@dataclass(frozen=True)
class PlanOutcome:
    """``plan`` is None when there is nothing to do; ``replayed`` when an earlier plan was found."""

    plan: BatchPlan | None
    replayed: bool


def plan_batch(
    ledger: LedgerPort,
    spec: PipelineSpec,
    offsets_source: OffsetsSource,
    sink: Sink,
    actor: Actor,
    decode: DecodeSpec | None = None,
) -> PlanOutcome:
    """Return the pipeline's planned batch, or write the next plan ahead of any work (I2).

    The pipeline row stays locked while Kafka is asked for offsets, so two runs
    can never plan different batches from the same cursor. ``decode``: a decoding resolved for this
    plan (an Avro reader schema, :func:`~airflow_kafka_offsets.service.decoding.next_decode`), recorded
    with a new plan in its transaction.
    """
    with ledger.transaction() as tx:
        epoch, next_batch_id = tx.lock_pipeline(spec)
        planned = tx.planned_batch_id(spec.name)
        if planned is not None:
            record = tx.batch(spec.name, planned)
            log.info(
                "pipeline %s: batch %s is already planned (since %s); replaying it",
                spec.name,
                planned,
                record.planned_at,
            )
            tx.audit(spec.name, planned, "replayed", {}, actor)
            return PlanOutcome(record.plan, replayed=True)
        cursors = tx.cursors(spec.name)
        offsets = offsets_source(spec.topics)
        ranges = plan_ranges(spec, cursors, offsets)
        if not has_work(ranges, cursors):
            log.info("pipeline %s: nothing new in %s; no batch planned", spec.name, ", ".join(spec.topics))
            return PlanOutcome(None, replayed=False)
        plan = BatchPlan(spec.name, next_batch_id, epoch, ranges, sink.output_uri(spec.name, next_batch_id))
        tx.insert_plan(plan, new_partitions(ranges, cursors), actor)
        if decode is not None and decode.reader is not None:
            tx.record_batch_decode(plan.pipeline, plan.batch_id, decode)
    crash_point("after_plan")
    log.info(
        "pipeline %s: planned batch %s (%s records)\n%s",
        spec.name,
        plan.batch_id,
        plan.records_planned,
        LoggedPartitionTable(plan.ranges, offsets=offsets),
    )
    return PlanOutcome(plan, replayed=False)


def load_batch(ledger: LedgerPort, pipeline: str, batch_id: int | None) -> BatchPlan | None:
    """The given batch if it still needs work, else the pipeline's planned batch, else None."""
    with ledger.transaction() as tx:
        if batch_id is None:
            batch_id = tx.planned_batch_id(pipeline)
            if batch_id is None:
                return None
        record = tx.batch(pipeline, batch_id)
    if record.state is BatchState.COMMITTED:
        log.info(
            "pipeline %s: batch %s was already committed at %s by %s",
            pipeline,
            batch_id,
            record.committed_at,
            describe_actor(record.committed_by),
        )
        return None
    if record.state is BatchState.ABORTED:
        raise BatchStateError(f"batch {batch_id} of pipeline {pipeline!r} was aborted; it cannot run")
    return record.plan
