"""A Spark attempt at a planned batch: the start of one running the batch's job
(:mod:`~airflow_kafka_offsets.service.jobs`) with its lease, its run and how it ended (recorded
against the batch's row lock), and the removal of ended attempts' staging once the batch is
committed or aborted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, BatchState
from airflow_kafka_offsets.core.report import check_report, parse_report
from airflow_kafka_offsets.core.tables import LoggedPartitionTable
from airflow_kafka_offsets.errors import AttemptLeaseLostError, SparkJobError
from airflow_kafka_offsets.ledger.port import LedgerPort, LedgerTransactionPort
from airflow_kafka_offsets.service.context import Submit
from airflow_kafka_offsets.service.decoding import batch_decoding
from airflow_kafka_offsets.service.faults import crash_point
from airflow_kafka_offsets.service.jobs import build_job, check_decode_errors, check_routing
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S, LeaseKeeper, LeaseLoss
from airflow_kafka_offsets.sinks import Sink
from airflow_kafka_offsets.sinks.base import RewritesInSpark

log = logging.getLogger(__name__)

LEASE_GONE = (
    "the ledger no longer held it running when Spark finished (declared dead by another run, or its lease had run "
    "out: a pause longer than the lease?)"
)


@dataclass(frozen=True)
class StagedAttempt:
    """A Spark attempt that succeeded; ``batch_state`` is the batch's state when it ended."""

    attempt_id: str
    staging_uri: str
    report: BatchReport
    batch_state: BatchState


def start_attempt(
    tx: LedgerTransactionPort, sink: Sink, plan: BatchPlan, actor: Actor, lease_s: float
) -> tuple[str, str]:
    """Record a new running attempt with its lease; returns (attempt id, staging URI)."""
    attempt_id = uuid.uuid4().hex
    staging_uri = sink.staging_uri(plan.pipeline, plan.batch_id, attempt_id)
    tx.start_attempt(plan, attempt_id, staging_uri, actor, lease_s)
    return attempt_id, staging_uri


def execute_attempt(
    ledger: LedgerPort,
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
    keeper = LeaseKeeper(ledger, attempt_id, lease_s)
    try:
        with keeper:
            rewrite = sink.rewrite_base() if isinstance(sink, RewritesInSpark) else None
            submit(
                build_job(plan, attempt_id, staging_uri, kafka_properties, min_partitions, decode, spec.sink, rewrite)
            )
        if (loss := keeper.lost) is not None:  # its staging may be gone already (another run took the batch)
            raise lease_lost(plan, attempt_id, loss)
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
            root = exc.root_cause if isinstance(exc, SparkJobError) else None
            held = tx.finish_attempt(attempt_id, None, f"{type(exc).__name__}: {exc}"[:4000], root)
        loss = keeper.lost or (None if held else LeaseLoss(datetime.now(UTC), LEASE_GONE))
        if loss is not None or state is not BatchState.PLANNED:  # else a planned batch keeps it to inspect
            sink.discard_attempt(staging_uri)
        if loss is not None and not isinstance(exc, AttemptLeaseLostError):  # the failure follows from the loss
            raise lease_lost(plan, attempt_id, loss) from exc
        raise
    with ledger.transaction() as tx:
        state = tx.batch(plan.pipeline, plan.batch_id, for_update=True).state
        held = tx.finish_attempt(attempt_id, report, None)
    if not held:
        sink.discard_attempt(staging_uri)
        raise lease_lost(plan, attempt_id, keeper.lost or LeaseLoss(datetime.now(UTC), LEASE_GONE))
    crash_point("after_spark")
    log.info(
        "pipeline %s: batch %s staged by attempt %s\n%s",
        plan.pipeline,
        plan.batch_id,
        attempt_id,
        LoggedPartitionTable(plan.ranges, report=report),
    )
    return StagedAttempt(attempt_id, staging_uri, report, state)


def lease_lost(plan: BatchPlan, attempt_id: str, loss: LeaseLoss) -> AttemptLeaseLostError:
    """The error of an attempt that lost its lease: what happened, that nothing was committed, what comes next."""
    return AttemptLeaseLostError(
        f"attempt {attempt_id} of batch {plan.batch_id} of pipeline {plan.pipeline!r} lost its lease at "
        f"{loss.at.isoformat(timespec='seconds')}: {loss.why}. Another run may have taken the batch; nothing was "
        f"committed by this attempt and its output is discarded; the next run replays batch {plan.batch_id}"
    )


def discard_ended_attempts(ledger: LedgerPort, sink: Sink, pipeline: str, batch_id: int) -> list[str]:
    """After a batch is committed or aborted: remove the staging of its attempts that have ended.

    A live attempt is left alone; it removes its own staging when it ends (see execute_attempt).
    """
    with ledger.transaction() as tx:
        tx.mark_dead_attempts(pipeline, batch_id)
        ended = [a for a in tx.attempts(pipeline, [batch_id], reports=False) if a.state != "running"]
    for attempt in ended:
        sink.discard_attempt(attempt.staging_uri)
    return [a.attempt_id for a in ended]
