"""Read a planned batch into staging once: reuse a succeeded attempt, wait for a live one, or start
one (:mod:`~airflow_kafka_offsets.service.attempts`). The second of a batch's three steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, BatchState
from airflow_kafka_offsets.errors import PipelineBusyError
from airflow_kafka_offsets.ledger import Attempt, describe_actor, raise_for_state
from airflow_kafka_offsets.ledger.port import LedgerPort
from airflow_kafka_offsets.service.attempts import execute_attempt, start_attempt
from airflow_kafka_offsets.service.context import Submit
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S, DEFAULT_WAIT_S
from airflow_kafka_offsets.service.readable import OffsetsSource, refuse_deleted_plan
from airflow_kafka_offsets.sinks import Sink

log = logging.getLogger(__name__)


def _still_staged(sink: Sink, pipeline_uid: str, plan: BatchPlan, attempt: Attempt) -> bool:
    """The attempt's output is still there: in its staging, or published by a commit that crashed."""
    if sink.read_report(attempt.staging_uri) is not None:
        return True
    return sink.published_attempt(pipeline_uid, plan) == attempt.attempt_id


def run_batch(
    ledger: LedgerPort,
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
