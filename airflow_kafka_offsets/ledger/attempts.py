"""Spark attempts of a batch and their leases.

A running attempt is *live* while its lease lasts (its worker renews it while Spark runs); once
the lease has run out the worker is gone and the attempt is marked ``dead``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchReport
from airflow_kafka_offsets.core.report import parse_report
from airflow_kafka_offsets.ledger.sql import Row, Statements, from_json, jsonb


@dataclass(frozen=True)
class Attempt:
    """One Spark run of a batch; several may exist, any succeeded one may be committed."""

    attempt_id: str
    pipeline: str
    batch_id: int
    state: str
    staging_uri: str
    report_document: str | None
    """The report as JSON text; :attr:`report` parses it when asked (a report lists every partition)."""
    actor: Actor
    started_at: datetime | None
    finished_at: datetime | None
    lease_expires_at: datetime | None
    lease_left_s: float | None
    error: str | None
    root_cause: str | None = None
    """The innermost error Spark's output named (null for attempts of older versions, and successes)."""

    @cached_property
    def report(self) -> BatchReport | None:
        return parse_report(json.loads(self.report_document)) if self.report_document else None

    @property
    def live(self) -> bool:
        return self.state == "running" and self.lease_left_s is not None and self.lease_left_s > 0

    @property
    def shown_state(self) -> str:
        """live, dead, succeeded or failed: a running attempt whose lease ran out is dead."""
        if self.state == "running":
            return "live" if self.live else "dead"
        return self.state


def _attempt_columns(report: bool, root_cause: bool = True) -> str:
    """An attempt row's columns; without ``report`` its document stays in the database (a report lists
    every partition: over a megabyte at 10,000 partitions). Without ``root_cause`` (a succeeded attempt has
    none) the commit path reads no column newer than the ledgers it commits on."""
    return (
        f"attempt_id, pipeline, batch_id, state, staging_uri, {'report::text' if report else 'NULL'}, actor,"
        " started_at, finished_at, lease_expires_at, extract(epoch FROM lease_expires_at - now()), error,"
        f" {'root_cause' if root_cause else 'NULL'}"
    )


def _attempt(row: Row) -> Attempt:
    attempt_id, pipeline, batch_id, state, staging_uri, report, actor, started, finished, lease, left, error, root = row
    return Attempt(
        attempt_id,
        pipeline,
        int(batch_id),
        state,
        staging_uri,
        report,
        Actor.from_json(from_json(actor)),
        started,
        finished,
        lease,
        None if left is None else float(left),
        error,
        root,
    )


class AttemptStatements(Statements):
    def start_attempt(self, plan: BatchPlan, attempt_id: str, staging_uri: str, actor: Actor, lease_s: float) -> None:
        self.execute(
            "INSERT INTO {s}.attempts (attempt_id, pipeline, batch_id, state, staging_uri, actor, heartbeat_at,"
            " lease_expires_at) VALUES (%s, %s, %s, 'running', %s, %s::jsonb, now(),"
            " now() + make_interval(secs => %s))",
            (attempt_id, plan.pipeline, plan.batch_id, staging_uri, jsonb(actor.to_json()), float(lease_s)),
        )

    def renew_lease(self, attempt_id: str, lease_s: float) -> bool:
        """Extend a running attempt's lease; False once it is no longer running (declared dead) or its lease
        has run out (another run may already count it dead: a lapsed lease is never revived)."""
        renewed: int = self.execute(
            "UPDATE {s}.attempts SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %s)"
            " WHERE attempt_id = %s AND state = 'running' AND lease_expires_at > now()",
            (float(lease_s), attempt_id),
        ).rowcount
        return renewed == 1

    def finish_attempt(
        self, attempt_id: str, report: BatchReport | None, error: str | None, root_cause: str | None = None
    ) -> bool:
        """Record how a running attempt ended (a failure with its root cause, when Spark named one); False if
        it no longer holds its lease (declared dead, or its lease ran out: another run may have taken the
        batch, so this attempt must not commit)."""
        cause = (", root_cause = %s", (root_cause,)) if root_cause is not None else ("", ())  # none on success
        finished: int = self.execute(
            "UPDATE {s}.attempts SET state = %s, finished_at = now(), report = %s::jsonb, error = %s"
            f"{cause[0]} WHERE attempt_id = %s AND state = 'running' AND lease_expires_at > now()",
            ("failed" if error else "succeeded", jsonb(report.raw) if report else None, error, *cause[1], attempt_id),
        ).rowcount
        return finished == 1

    def mark_dead_attempts(
        self, pipeline: str, batch_id: int | None = None, superseded_by: Actor | None = None
    ) -> list[str]:
        """Mark running attempts whose lease ran out as dead; returns their ids.

        With ``superseded_by`` (an actor with a try number), attempts of earlier tries of the same
        Airflow task and run are dead too: Airflow starts a try only after the previous one ended.
        """
        actor = superseded_by or Actor()
        same_task = actor.try_number is not None and actor.run_id is not None
        rows = self.fetchall(
            "UPDATE {s}.attempts SET state = 'dead', finished_at = now(), error = CASE"
            "   WHEN lease_expires_at IS NULL THEN 'no lease (started by an older version)'"
            "   WHEN lease_expires_at <= now() THEN 'lease expired at ' || lease_expires_at::text"
            "   ELSE 'superseded by a later try of its task' END"
            " WHERE pipeline = %s AND (%s::bigint IS NULL OR batch_id = %s) AND state = 'running'"
            " AND (lease_expires_at IS NULL OR lease_expires_at <= now()"
            "      OR (%s AND actor->>'dag_id' IS NOT DISTINCT FROM %s AND actor->>'run_id' = %s"
            "          AND actor->>'task_id' IS NOT DISTINCT FROM %s"
            "          AND coalesce(actor->>'map_index', '') = coalesce(%s, '')"
            "          AND (actor->>'try_number')::int < %s))"
            " RETURNING attempt_id",
            (
                pipeline,
                batch_id,
                batch_id,
                same_task,
                actor.dag_id,
                actor.run_id,
                actor.task_id,
                None if actor.map_index is None else str(actor.map_index),
                int(actor.try_number) if actor.try_number is not None and same_task else 0,
            ),
        )
        return [r[0] for r in rows]

    def attempts(self, pipeline: str, batch_ids: Sequence[int], *, reports: bool = True) -> list[Attempt]:
        """Attempts of the given batches, oldest first (without ``reports``, the batch steps' read: with no
        report document and no root cause)."""
        rows = self.fetchall(
            f"SELECT {_attempt_columns(reports, root_cause=reports)} FROM {{s}}.attempts"
            " WHERE pipeline = %s AND batch_id = ANY(%s::bigint[]) ORDER BY started_at, attempt_id",
            (pipeline, list(batch_ids)),
        )
        return [_attempt(r) for r in rows]

    def latest_succeeded_attempt(self, pipeline: str, batch_id: int, *, report: bool = True) -> Attempt | None:
        """The attempt a commit takes: the last one that succeeded with a report (without ``report``: returned
        with no report document)."""
        row = self.fetchone(
            f"SELECT {_attempt_columns(report, root_cause=False)} FROM {{s}}.attempts"
            " WHERE pipeline = %s AND batch_id = %s AND state = 'succeeded' AND report IS NOT NULL"
            " ORDER BY finished_at DESC LIMIT 1",
            (pipeline, batch_id),
        )
        return None if row is None else _attempt(row)

    def batches_to_sweep(self, pipeline: str) -> set[int]:
        """Batches that may have left files behind as far as the ledger knows: with a running attempt
        (its worker may be dead), or aborted."""
        rows = self.fetchall(
            "SELECT DISTINCT batch_id FROM {s}.attempts WHERE pipeline = %s AND state = 'running'"
            " UNION SELECT batch_id FROM {s}.batches WHERE pipeline = %s AND state = 'aborted'",
            (pipeline, pipeline),
        )
        return {int(r[0]) for r in rows}
