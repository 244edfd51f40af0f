"""Commit a batch: publish its staged output and advance the cursor in one transaction (I3). The last
of a batch's three steps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchState
from airflow_kafka_offsets.core.tables import LoggedPartitionTable
from airflow_kafka_offsets.errors import BatchStateError, OutputLocationError
from airflow_kafka_offsets.ledger import describe_actor
from airflow_kafka_offsets.ledger.port import LedgerPort
from airflow_kafka_offsets.service.attempts import discard_ended_attempts
from airflow_kafka_offsets.service.decoding import batch_decoding
from airflow_kafka_offsets.service.faults import crash_point
from airflow_kafka_offsets.sinks import Publication, Sink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommitOutcome:
    """``committed_now`` is False when another run had already committed the batch; ``tables``: with a
    sink of many tables, what the commit produced in each (snapshot id or version, records)."""

    plan: BatchPlan
    committed_now: bool
    records: int
    tables: Mapping[str, Any] | None = None


def commit_batch(
    ledger: LedgerPort,
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
