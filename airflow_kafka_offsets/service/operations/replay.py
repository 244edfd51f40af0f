"""replay: re-read committed batches chosen by number, offsets or time, and rebuild their output."""

from __future__ import annotations

import logging
from dataclasses import astuple
from datetime import UTC, datetime

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.merge import replay_refusal
from airflow_kafka_offsets.core.model import BatchState, PipelineSpec
from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.replay import OPERATION, ReplaySelection, selection
from airflow_kafka_offsets.core.sink_formats import SINK_FORMATS
from airflow_kafka_offsets.errors import (
    BatchStateError,
    InvalidPipelineSpecError,
    MergeOperationRefusedError,
    ReportMismatchError,
)
from airflow_kafka_offsets.ledger import Ledger, LedgerTransaction
from airflow_kafka_offsets.service.attempts import execute_attempt, start_attempt
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.decoding import batch_decoding
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S
from airflow_kafka_offsets.service.operations.result import OperationResult
from airflow_kafka_offsets.service.readable import refuse_deleted_replay
from airflow_kafka_offsets.sinks import ChecksReplay, Publication, Sink

__all__ = ["OPERATION", "handle", "replay_batch", "resolve_replay"]

log = logging.getLogger(__name__)


def resolve_replay(
    ledger: Ledger, kafka: KafkaOffsetsClient | None, pipeline: str, selection: ReplaySelection
) -> list[int]:
    """The committed ingest batches a selection covers; an empty result is an error, not a no-op."""
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
        if selection.offset_ranges:
            ids: set[int] = set()
            for tp, start, end in selection.offset_ranges:
                if tp.topic not in spec.topics:
                    raise InvalidPipelineSpecError(f"topic {tp.topic!r} is not part of pipeline {pipeline!r}")
                ids.update(tx.batches_overlapping(pipeline, tp.topic, tp.partition, start, end))
            chosen = sorted(ids)
        elif selection.since is not None:
            chosen = _batches_in_time_window(tx, kafka, pipeline, spec, selection.since, selection.until)
        elif selection.first_batch is not None or selection.last_batch is not None:
            first, last = selection.first_batch, selection.last_batch
            if first is not None and last is not None and last < first:
                raise InvalidPipelineSpecError(f"empty batch range {first}-{last}")
            chosen = tx.committed_ingest_batches(pipeline, first, last)
        else:
            raise InvalidPipelineSpecError("a replay needs batch numbers, offset ranges or a time window")
    if not chosen:
        raise InvalidPipelineSpecError(f"the selection matches no committed batch of pipeline {pipeline!r}")
    return chosen


def _batches_in_time_window(
    tx: LedgerTransaction,
    kafka: KafkaOffsetsClient | None,
    pipeline: str,
    spec: PipelineSpec,
    since: datetime,
    until: datetime | None,
) -> list[int]:
    """The batches overlapping the records Kafka timestamped from ``since`` to ``until`` (default: now)."""
    if kafka is None:
        raise InvalidPipelineSpecError("a time window needs Kafka to resolve timestamps to offsets")
    until = until or datetime.now(UTC)
    if until <= since:
        raise InvalidPipelineSpecError(f"empty time window: {since} is not before {until}")
    tps = sorted(tp for tp in tx.cursors(pipeline) if tp.topic in spec.topics)
    starts = kafka.offsets_for_time(tps, since)
    ends = kafka.offsets_for_time(tps, until)
    latest = {tp: o.latest for tp, o in kafka.offsets(spec.topics).items()}
    ids: set[int] = set()
    for tp in tps:
        first_offset, end_offset = starts.get(tp), ends.get(tp)
        if first_offset is None:
            continue
        if end_offset is None:
            end_offset = latest.get(tp, 0)
        if end_offset > first_offset:
            ids.update(tx.batches_overlapping(pipeline, tp.topic, tp.partition, first_offset, end_offset))
    return sorted(ids)


def replay_batch(ctx: OperationContext, pipeline: str, batch_id: int, target_root: str | None = None) -> str:
    """Re-read a committed batch and rebuild its output, in place or under ``target_root``.

    The cursor does not move. The new output must hold exactly the records the
    batch committed (same count and offsets per partition), or nothing is published.
    """
    ledger, actor, submit = ctx.ledger, ctx.actor, ctx.spark("replay")
    with ledger.transaction() as tx:
        record = tx.batch(pipeline, batch_id)
        committed = tx.committed_counts(pipeline, batch_id)
        spec = tx.pipeline_spec(pipeline)
        uid = tx.pipeline_uid(pipeline)
        decode = batch_decoding(tx, spec, batch_id)
        committed_batches = tx.committed_ingest_batches(pipeline)
        latest = committed_batches[-1] if committed_batches else None
    if record.state is not BatchState.COMMITTED:
        raise BatchStateError(
            f"batch {batch_id} of {pipeline!r} is {record.state.value}; only committed batches replay"
        )
    if spec.sink.merge is not None and batch_id != latest:
        raise MergeOperationRefusedError(replay_refusal(pipeline, batch_id, latest))
    sink: Sink = ctx.sinks.for_spec(ledger, spec)
    if target_root is not None:
        if SINK_FORMATS[spec.sink.format].table:
            raise InvalidPipelineSpecError(
                f"pipeline {pipeline!r} writes to a {spec.sink.format.value} table: a replay rewrites the batch in "
                "the table, in place; replay_output_root applies to the directory sink only"
            )
        sink = ctx.sinks.directory(target_root)
    plan = record.plan
    if target_root is None and isinstance(sink, ChecksReplay):
        sink.check_replay(uid, plan)  # a publication that would be refused: before any Spark job
    refuse_deleted_replay(ledger, ctx.kafka.offsets, pipeline, [batch_id])  # before any Spark job
    log.info("pipeline %s: replaying batch %s (%s records) with Spark", pipeline, batch_id, record.records_committed)
    with ledger.transaction() as tx:
        tx.batch(pipeline, batch_id, for_update=True)  # ordered against a sweep of the batch's staging
        attempt_id, staging_uri = start_attempt(tx, sink, plan, actor, DEFAULT_LEASE_S)
    report = execute_attempt(ledger, sink, plan, attempt_id, staging_uri, submit, ctx.kafka_properties).report
    got = {p.topic_partition: (p.records, p.min_offset, p.max_offset) for p in report.partitions}
    expected = {tp: astuple(c) for tp, c in committed.items() if c.records > 0}
    if got != expected:
        sink.discard_attempt(staging_uri)
        raise ReportMismatchError(
            f"replay of batch {batch_id} of {pipeline!r} read {got} but the batch committed {expected} "
            "(records deleted by retention since?); nothing was published"
        )
    destination = sink.output_uri(pipeline, batch_id)
    with ledger.transaction() as tx:
        tx.batch(pipeline, batch_id, for_update=True)  # no concurrent publish of the same batch
        tables = sink.publish(tx, Publication(uid, plan, attempt_id, staging_uri, report.records, decode, replay=True))
        if tables:
            tx.record_tables(pipeline, batch_id, tables)
        tx.audit(
            pipeline,
            batch_id,
            "replay",
            {"output_uri": destination, "in_place": target_root is None, "records": report.records},
            actor,
        )
    sink.discard_attempt(staging_uri)  # only this attempt's: another replay may still be staging
    log.info("pipeline %s: replayed batch %s into %s", pipeline, batch_id, destination)
    return destination


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    ctx.spark("replay")
    batch_ids = resolve_replay(ctx.ledger, ctx.kafka, request.pipeline, selection(request.values))
    refuse_deleted_replay(ctx.ledger, ctx.kafka.offsets, request.pipeline, batch_ids)  # all, before any Spark job
    target = request.get("replay_output_root")
    outputs = [replay_batch(ctx, request.pipeline, b, target) for b in batch_ids]
    return OperationResult(
        {"replayed": batch_ids, "outputs": outputs},
        "\n".join(f"replayed batch {b} -> {o}" for b, o in zip(batch_ids, outputs)),
    )
