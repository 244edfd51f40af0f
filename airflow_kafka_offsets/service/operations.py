"""Manual operations on a pipeline: status and lag, replay, offset reset, catch-up, abort (sweep: sweep.py).

Used by the manual-operations DAG (trigger form) and the ``airflow-kafka-offsets``
CLI. Every change goes through the ledger, so it keeps its account of every
offset (I1), and every operation is recorded in the audit trail.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.model import BatchState, PipelineSpec
from airflow_kafka_offsets.core.operations.replay import ReplaySelection
from airflow_kafka_offsets.core.planner import partition_lag
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest, plan_reset
from airflow_kafka_offsets.core.tables import render_table
from airflow_kafka_offsets.errors import BatchStateError, InvalidPipelineSpecError, ReportMismatchError
from airflow_kafka_offsets.ledger import Ledger, LedgerTransaction
from airflow_kafka_offsets.service.attempts import discard_ended_attempts, execute_attempt, start_attempt
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.decoding import batch_decoding, next_decode
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S
from airflow_kafka_offsets.service.plan import OffsetsSource, plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.service.status import (
    attempt_counts,
    attempt_status,
    batch_status,
    lagging_cursors,
    partition_statuses,
    shown_partitions,
)
from airflow_kafka_offsets.sinks import LocalDirectorySink, ManifestDirectorySink, Publication, Sink

log = logging.getLogger(__name__)


# status -------------------------------------------------------------------------


def pipeline_status(ctx: OperationContext, pipeline: str, last: int = 10) -> dict[str, Any]:
    """Cursor, Kafka bounds and lag (records and time) per partition; recent batches; any batch in flight."""
    ledger, kafka = ctx.ledger, ctx.kafka
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
        cursors = tx.cursors(pipeline)
        planned = tx.planned_batch_id(pipeline)
        in_flight = tx.batch(pipeline, planned) if planned is not None else None
        batches = tx.recent_batches(pipeline, last)
        attempts = tx.attempts(pipeline, [b.batch_id for b in batches])
    offsets = kafka.offsets(spec.topics)
    shown = shown_partitions(spec.topics, cursors, offsets)
    oldest_unread = kafka.timestamps_at(lagging_cursors(shown, cursors, offsets))
    partitions = [p.to_json() for p in partition_statuses(shown, cursors, offsets, oldest_unread, datetime.now(UTC))]
    return {
        "pipeline": pipeline,
        "topics": list(spec.topics),
        "output_root": spec.output_root,
        "sink": ctx.sinks.for_spec(ledger, spec).describe(),
        "partitions": partitions,
        "lag_records_total": sum(p["lag_records"] or 0 for p in partitions),
        "in_flight": None
        if in_flight is None
        else {
            "batch_id": in_flight.plan.batch_id,
            "planned_at": in_flight.planned_at.isoformat(),
            "records_planned": in_flight.plan.records_planned,
            "planned_by": in_flight.planned_by.to_json(),
        },
        "batches": [batch_status(b) for b in batches],
        "attempts": [attempt_status(a) for a in attempts],
        "attempt_counts": attempt_counts(attempts),
    }


def render_status(status: Mapping[str, Any]) -> str:
    parts = render_table(
        ["partition", "committed", "log start", "log end", "lag", "lag (s)"],
        [
            [
                f"{p['topic']}-{p['partition']}",
                p["committed_offset"],
                p["log_start_offset"],
                p["log_end_offset"],
                p["lag_records"],
                p["lag_seconds"],
            ]
            for p in status["partitions"]
        ],
    )
    batches = render_table(
        ["batch", "kind", "state", "planned", "committed", "bytes", "at"],
        [
            [
                b["batch_id"],
                b["kind"],
                b["state"],
                b["records_planned"],
                b["records_committed"],
                b["output_bytes"],
                b["committed_at"] or b["planned_at"],
            ]
            for b in status["batches"]
        ],
    )
    flight = status["in_flight"]
    flight_line = (
        f"in flight: batch {flight['batch_id']} planned at {flight['planned_at']} ({flight['records_planned']} records)"
        if flight
        else "in flight: none"
    )
    attempts = render_table(
        ["attempt", "batch", "state", "run", "started", "ended / lease until"],
        [
            [
                a["attempt_id"][:12],
                a["batch_id"],
                a["state"],
                a["run_id"],
                a["started_at"],
                a["finished_at"] or a["lease_expires_at"],
            ]
            for a in status["attempts"]
        ],
    )
    counts = ", ".join(f"{n} {state}" for state, n in status["attempt_counts"].items())
    sink = status["sink"]
    sink_line = f"output: {sink['format']}{' table ' + sink['table'] if sink['table'] else ''} at {sink['location']}"
    return (
        f"pipeline {status['pipeline']} ({', '.join(status['topics'])}), lag {status['lag_records_total']} records\n"
        f"{sink_line}\n{flight_line}\n\n{parts}\n\n{batches}\n\nSpark attempts: {counts}\n{attempts}"
    )


# replay -------------------------------------------------------------------------


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
    if record.state is not BatchState.COMMITTED:
        raise BatchStateError(
            f"batch {batch_id} of {pipeline!r} is {record.state.value}; only committed batches replay"
        )
    sink: Sink = ctx.sinks.for_spec(ledger, spec)
    if target_root is not None:
        if not isinstance(sink, (LocalDirectorySink, ManifestDirectorySink)):
            raise InvalidPipelineSpecError(
                f"pipeline {pipeline!r} writes to a {spec.sink.format.value} table: a replay rewrites the batch in "
                "the table, in place; replay_output_root applies to the directory sink only"
            )
        sink = ctx.sinks.directory(target_root)
    plan = record.plan
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
        sink.publish(tx, Publication(uid, plan, attempt_id, staging_uri, report.records, decode, replay=True))
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


# reset --------------------------------------------------------------------------


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
        batch_id = tx.apply_reset(pipeline, resets, detail, ctx.actor)
    log.info("pipeline %s: reset %s applied as batch %s", pipeline, request.mode.value, batch_id)
    return ResetOutcome(pipeline, True, batch_id, table, changes)


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
        tx.abort_batch(pipeline, planned, reason, actor)
        plan = tx.batch(pipeline, planned).plan
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


# catch-up -----------------------------------------------------------------------


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
        decode = next_decode(ledger, spec, sink, ctx.registry) if spec.decode and spec.decode.avro else None
        outcome = plan_batch(ledger, spec, offsets_source, sink, actor, decode)
        if outcome.plan is None:
            break
        run_batch(ledger, sink, outcome.plan, submit, ctx.kafka_properties, actor)
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


def mirror_to_consumer_group(ledger: Ledger, kafka: KafkaOffsetsClient, pipeline: str) -> str | None:
    """Copy the committed cursors into the pipeline's consumer group, if it has one (never read back)."""
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
        cursors = tx.cursors(pipeline)
    if not spec.consumer_group:
        return None
    kafka.mirror_consumer_group(spec.consumer_group, {tp: o for tp, o in cursors.items() if tp.topic in spec.topics})
    return spec.consumer_group
