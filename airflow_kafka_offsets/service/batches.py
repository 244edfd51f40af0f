"""The three steps of a batch (plan, read, commit), wired from the pure planner, the ledger,
Kafka, Spark and the sink. Operators and the CLI are thin wrappers over these functions.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import (
    BatchPlan,
    BatchReport,
    BatchState,
    DecodeSpec,
    PipelineSpec,
)
from airflow_kafka_offsets.core.planner import has_work, new_partitions, plan_ranges
from airflow_kafka_offsets.core.report import check_report, parse_report
from airflow_kafka_offsets.core.tables import LoggedPartitionTable
from airflow_kafka_offsets.errors import (
    BatchStateError,
    OutputLocationError,
    PipelineBusyError,
    SparkJobError,
)
from airflow_kafka_offsets.ledger import Attempt, Ledger, LedgerTransaction, describe_actor, raise_for_state
from airflow_kafka_offsets.ledger.decodings import record_batch_decode
from airflow_kafka_offsets.service.context import Submit
from airflow_kafka_offsets.service.decoding import batch_decoding
from airflow_kafka_offsets.service.faults import crash_point
from airflow_kafka_offsets.service.jobs import build_job, check_decode_errors, check_routing
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S, DEFAULT_WAIT_S, LeaseKeeper
from airflow_kafka_offsets.service.readable import OffsetsSource, refuse_deleted_plan
from airflow_kafka_offsets.sinks import Publication, Sink

log = logging.getLogger(__name__)

__all__ = ["OffsetsSource"]  # re-exported: where callers of plan_batch have always found it


@dataclass(frozen=True)
class PlanOutcome:
    """``plan`` is None when there is nothing to do; ``replayed`` when an earlier plan was found."""

    plan: BatchPlan | None
    replayed: bool


@dataclass(frozen=True)
class CommitOutcome:
    """``committed_now`` is False when another run had already committed the batch; ``tables``: with a
    sink of many tables, what the commit produced in each (snapshot id or version, records)."""

    plan: BatchPlan
    committed_now: bool
    records: int
    tables: Mapping[str, Any] | None = None


def plan_batch(
    ledger: Ledger,
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
            record_batch_decode(tx, plan.pipeline, plan.batch_id, decode)
    crash_point("after_plan")
    log.info(
        "pipeline %s: planned batch %s (%s records)\n%s",
        spec.name,
        plan.batch_id,
        plan.records_planned,
        LoggedPartitionTable(plan.ranges, offsets=offsets),
    )
    return PlanOutcome(plan, replayed=False)


def load_batch(ledger: Ledger, pipeline: str, batch_id: int | None) -> BatchPlan | None:
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


@dataclass(frozen=True)
class StagedAttempt:
    """A Spark attempt that succeeded; ``batch_state`` is the batch's state when it ended."""

    attempt_id: str
    staging_uri: str
    report: BatchReport
    batch_state: BatchState


def start_attempt(tx: LedgerTransaction, sink: Sink, plan: BatchPlan, actor: Actor, lease_s: float) -> tuple[str, str]:
    """Record a new running attempt with its lease; returns (attempt id, staging URI)."""
    attempt_id = uuid.uuid4().hex
    staging_uri = sink.staging_uri(plan.pipeline, plan.batch_id, attempt_id)
    tx.start_attempt(plan, attempt_id, staging_uri, actor, lease_s)
    return attempt_id, staging_uri


def execute_attempt(
    ledger: Ledger,
    sink: Sink,
    plan: BatchPlan,
    attempt_id: str,
    staging_uri: str,
    submit: Submit,
    kafka_properties: Mapping[str, str],
    min_partitions: int | None = None,
    lease_s: float = DEFAULT_LEASE_S,
) -> StagedAttempt:
    """Run a started attempt's Spark job, renewing its lease meanwhile, and record how it ended.

    The end is recorded with the batch row locked, so it is ordered against a commit: either the
    commit sees this attempt ended (and cleans its staging), or this attempt sees the batch
    committed. An attempt declared dead while Spark ran may have lost its staging: refused.
    """
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(plan.pipeline)
        decode = batch_decoding(tx, spec, plan.batch_id)
    try:
        with LeaseKeeper(ledger, attempt_id, lease_s):
            submit(build_job(plan, attempt_id, staging_uri, kafka_properties, min_partitions, decode, spec.sink))
        raw = sink.read_report(staging_uri)
        if raw is None:
            raise SparkJobError(f"Spark finished but wrote no report to {staging_uri}")
        report = parse_report(raw)
        check_report(plan, report)
        check_decode_errors(plan, report, decode)
        check_routing(plan, report, spec.sink.routes)
    except BaseException as exc:
        with ledger.transaction() as tx:
            state = tx.batch(plan.pipeline, plan.batch_id, for_update=True).state
            tx.finish_attempt(attempt_id, None, f"{type(exc).__name__}: {exc}"[:4000])
        if state is not BatchState.PLANNED:  # no commit will clean it up; a planned batch keeps it to inspect
            sink.discard_attempt(staging_uri)
        raise
    with ledger.transaction() as tx:
        state = tx.batch(plan.pipeline, plan.batch_id, for_update=True).state
        held = tx.finish_attempt(attempt_id, report, None)
    if not held:
        sink.discard_attempt(staging_uri)
        raise SparkJobError(
            f"attempt {attempt_id} of batch {plan.batch_id} of pipeline {plan.pipeline!r} lost its lease: it was "
            "declared dead while Spark ran (a pause longer than the lease?), so its output may be incomplete and "
            "was discarded; run the read again"
        )
    crash_point("after_spark")
    log.info(
        "pipeline %s: batch %s staged by attempt %s\n%s",
        plan.pipeline,
        plan.batch_id,
        attempt_id,
        LoggedPartitionTable(plan.ranges, report=report),
    )
    return StagedAttempt(attempt_id, staging_uri, report, state)


def _still_staged(sink: Sink, pipeline_uid: str, plan: BatchPlan, attempt: Attempt) -> bool:
    """The attempt's output is still there: in its staging, or published by a commit that crashed."""
    if sink.read_report(attempt.staging_uri) is not None:
        return True
    return sink.published_attempt(pipeline_uid, plan) == attempt.attempt_id


def run_batch(
    ledger: Ledger,
    sink: Sink,
    plan: BatchPlan,
    submit: Submit,
    kafka_properties: Mapping[str, str],
    actor: Actor,
    min_partitions: int | None = None,
    *,
    lease_s: float = DEFAULT_LEASE_S,
    wait_s: float = DEFAULT_WAIT_S,
    poll_s: float = 2.0,
    offsets_source: OffsetsSource | None = None,
) -> BatchReport | None:
    """Read a planned batch into staging once; returns the report of the attempt that read it.

    A succeeded attempt of the batch (an earlier try's, or another run's) is used as it is. While
    another run's attempt is live (its lease has not run out), this run waits for it, at most
    ``wait_s`` seconds, instead of starting a second Spark job; if that attempt dies or fails, this
    run starts its own. Returns None when the batch reads no records (Spark is skipped) or was
    committed meanwhile. With ``offsets_source``, a batch whose records Kafka no longer holds is refused
    (:class:`~airflow_kafka_offsets.errors.RecordsDeletedError`) before an attempt starts.
    """
    if not plan.readable_ranges:
        log.info("pipeline %s: batch %s reads no records; Spark is skipped", plan.pipeline, plan.batch_id)
        return None
    deadline = time.monotonic() + wait_s
    waited_for: str | None = None
    while True:
        with ledger.transaction() as tx:
            record = tx.batch(plan.pipeline, plan.batch_id, for_update=True)  # one attempt starts at a time
            if record.state is BatchState.COMMITTED:
                log.info(
                    "pipeline %s: batch %s was already committed at %s by %s; nothing to read",
                    plan.pipeline,
                    plan.batch_id,
                    record.committed_at,
                    describe_actor(record.committed_by),
                )
                return None
            raise_for_state(record, BatchState.PLANNED)
            for dead in tx.mark_dead_attempts(plan.pipeline, plan.batch_id, superseded_by=actor):
                log.warning(
                    "pipeline %s: attempt %s of batch %s is dead (lease run out, or its task was retried)",
                    plan.pipeline,
                    dead,
                    plan.batch_id,
                )
            done = tx.latest_succeeded_attempt(plan.pipeline, plan.batch_id)
            if done is not None and _still_staged(sink, tx.pipeline_uid(plan.pipeline), plan, done):
                log.info(
                    "pipeline %s: batch %s was already read by attempt %s of %s; using its report, no Spark run",
                    plan.pipeline,
                    plan.batch_id,
                    done.attempt_id,
                    describe_actor(done.actor),
                )
                return done.report
            live = next((a for a in tx.attempts(plan.pipeline, [plan.batch_id], reports=False) if a.live), None)
            if live is None:
                if offsets_source is not None:
                    refuse_deleted_plan(plan, offsets_source)
                attempt_id, staging_uri = start_attempt(tx, sink, plan, actor, lease_s)
                break
        if time.monotonic() >= deadline:
            raise PipelineBusyError(
                f"batch {plan.batch_id} of pipeline {plan.pipeline!r} is being read by attempt {live.attempt_id} of "
                f"{describe_actor(live.actor)} (lease until {live.lease_expires_at}); gave up after waiting "
                f"{wait_s:.0f}s for it: retry later, or let its lease run out if its worker is gone"
            )
        if waited_for != live.attempt_id:
            log.info(
                "pipeline %s: batch %s is being read by attempt %s of %s; waiting for it (up to %.0fs) instead "
                "of reading it again",
                plan.pipeline,
                plan.batch_id,
                live.attempt_id,
                describe_actor(live.actor),
                max(deadline - time.monotonic(), 0),
            )
            waited_for = live.attempt_id
        time.sleep(poll_s)
    staged = execute_attempt(
        ledger, sink, plan, attempt_id, staging_uri, submit, kafka_properties, min_partitions, lease_s
    )
    if staged.batch_state is not BatchState.PLANNED:
        sink.discard_attempt(staging_uri)
        record = ledger.batch(plan.pipeline, plan.batch_id)
        log.info(
            "pipeline %s: batch %s was %s by %s while attempt %s ran; its output is discarded",
            plan.pipeline,
            plan.batch_id,
            record.state.value,
            describe_actor(record.committed_by),
            attempt_id,
        )
        return None
    return staged.report


def discard_ended_attempts(ledger: Ledger, sink: Sink, pipeline: str, batch_id: int) -> list[str]:
    """After a batch is committed or aborted: remove the staging of its attempts that have ended.

    A live attempt is left alone; it removes its own staging when it ends (see execute_attempt).
    """
    with ledger.transaction() as tx:
        tx.mark_dead_attempts(pipeline, batch_id)
        ended = [a for a in tx.attempts(pipeline, [batch_id], reports=False) if a.state != "running"]
    for attempt in ended:
        sink.discard_attempt(attempt.staging_uri)
    return [a.attempt_id for a in ended]


def commit_batch(
    ledger: Ledger,
    sink: Sink,
    pipeline: str,
    batch_id: int,
    actor: Actor,
) -> CommitOutcome:
    """Publish the batch's staged output and advance the cursor in one transaction (I3).

    The batch row stays locked from the check to the commit, so a concurrent or
    stale run either waits and then finds the batch committed, or fails the
    compare-and-set; it never publishes or commits a second time.
    """
    with ledger.transaction() as tx:
        record = tx.batch(pipeline, batch_id, for_update=True)
        plan = record.plan
        if record.state is BatchState.COMMITTED:
            log.info(
                "pipeline %s: batch %s was already committed at %s by %s; nothing to do",
                pipeline,
                batch_id,
                record.committed_at,
                describe_actor(record.committed_by),
            )
            return CommitOutcome(plan, committed_now=False, records=record.records_committed or 0)
        if record.state is not BatchState.PLANNED:
            raise BatchStateError(f"batch {batch_id} of pipeline {pipeline!r} is {record.state.value}; cannot commit")
        attempt = None
        tables = None
        uid = tx.pipeline_uid(pipeline)
        decode = batch_decoding(tx, tx.pipeline_spec(pipeline), batch_id)
        if plan.readable_ranges:
            # A succeeded attempt's report was checked against this plan (which never changes) before the
            # attempt was marked succeeded; it stays in the ledger, which copies its counts itself.
            attempt = tx.latest_succeeded_attempt(pipeline, batch_id, report=False)
            if attempt is None:
                raise BatchStateError(
                    f"batch {batch_id} of pipeline {pipeline!r} has no successful Spark attempt to commit"
                )
        records, output_bytes = tx.store_counts(plan, attempt.attempt_id if attempt else None)
        if attempt is not None:
            published = sink.published_attempt(uid, plan)
            if published is None:
                publication = Publication(uid, plan, attempt.attempt_id, attempt.staging_uri, records, decode)
                tables = sink.publish(tx, publication)
            elif published in {a.attempt_id for a in tx.attempts(pipeline, [batch_id], reports=False)}:
                log.info(
                    "pipeline %s: batch %s attempt %s was published by an earlier try",
                    pipeline,
                    batch_id,
                    published,
                )
            else:
                raise OutputLocationError(
                    f"batch {batch_id} of pipeline {pipeline!r}: its output location {plan.output_uri} already holds "
                    f"attempt {published}, which this ledger never ran (another ledger's output, or this pipeline's "
                    "from before its ledger was created again); nothing was committed: move that output away or "
                    "give the pipeline a new output root, then commit again"
                )
            crash_point("after_publish")
        else:  # a directory sink gives every committed ingest batch a readable output, an empty one here
            sink.publish(tx, Publication(uid, plan, None, None, 0, decode))
        tx.advance_cursors(plan)
        tx.record_commit(plan, attempt.attempt_id if attempt else None, records, output_bytes, actor, tables)
        crash_point("in_commit_transaction")
    crash_point("after_commit")
    discard_ended_attempts(ledger, sink, pipeline, batch_id)
    log.info(
        "pipeline %s: committed batch %s (%s records) at %s\n%s",
        pipeline,
        batch_id,
        records,
        plan.output_uri,
        LoggedPartitionTable(plan.ranges),
    )
    return CommitOutcome(plan, committed_now=True, records=records, tables=tables)
