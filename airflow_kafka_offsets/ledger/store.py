"""The PostgreSQL ledger: pipelines, cursors, write-ahead batch plans, attempts and an audit trail.

PostgreSQL enforces the contract where it can: the pipeline row lock
serialises planning, a partial unique index allows one planned batch per
pipeline, a statement-level check keeps live ranges of one epoch from overlapping,
and the commit is a compare-and-set on the cursors inside the transaction that
marks the batch committed.

Works with psycopg2 and psycopg 3 connections (the Postgres provider hands out
either): only DB-API calls and ``%s`` parameters are used.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from airflow_kafka_offsets import __version__
from airflow_kafka_offsets.core.actor import Actor, describe_actor
from airflow_kafka_offsets.core.model import (
    BatchPlan,
    BatchReport,
    BatchState,
    PartitionRange,
    PipelineSpec,
    TopicPartition,
)
from airflow_kafka_offsets.core.report import parse_report
from airflow_kafka_offsets.core.resets import PartitionReset, is_rewind, reset_ranges
from airflow_kafka_offsets.core.spec_diff import diff_specs, mismatch_message
from airflow_kafka_offsets.errors import (
    BatchNotFoundError,
    BatchStateError,
    CursorMovedError,
    LedgerError,
    LedgerSchemaTooNewError,
    PipelineBusyError,
    PipelineNotFoundError,
    PipelineSpecMismatchError,
)
from airflow_kafka_offsets.ledger.schema import MIGRATIONS, SCHEMA_VERSION, quote_schema

LOCK_NOT_AVAILABLE = "55P03"
Row = tuple[Any, ...]


@dataclass(frozen=True)
class BatchRecord:
    """A batch as the ledger holds it."""

    plan: BatchPlan
    state: BatchState
    planned_at: datetime
    committed_at: datetime | None
    records_committed: int | None
    planned_by: Actor
    committed_by: Actor | None


@dataclass(frozen=True)
class Attempt:
    """One Spark run of a batch; several may exist, any succeeded one may be committed.

    A running attempt is *live* while its lease lasts (its worker renews it while Spark runs);
    once the lease has run out the worker is gone and the attempt is marked ``dead``.
    """

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


def _attempt_columns(report: bool) -> str:
    """An attempt row's columns; without ``report`` its document stays in the database (a report lists
    every partition: over a megabyte at 10,000 partitions)."""
    return (
        f"attempt_id, pipeline, batch_id, state, staging_uri, {'report::text' if report else 'NULL'}, actor,"
        " started_at, finished_at, lease_expires_at, extract(epoch FROM lease_expires_at - now()), error"
    )


def _attempt(row: Row) -> Attempt:
    attempt_id, pipeline, batch_id, state, staging_uri, report, actor, started, finished, lease, left, error = row
    return Attempt(
        attempt_id,
        pipeline,
        int(batch_id),
        state,
        staging_uri,
        report,
        Actor.from_json(_json(actor)),
        started,
        finished,
        lease,
        None if left is None else float(left),
        error,
    )


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # already broken: nothing left to release
        pass


def _jsonb(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _int_array(values: Iterable[int | None]) -> str:
    """A PostgreSQL array literal, for ``unnest(%s::bigint[], ...)`` over many partitions.

    The server reads it as one constant; a Python list goes out as ``ARRAY[...]`` with one
    expression per element, which takes longer to parse and plan than the statement takes to run.
    """
    return "{" + ",".join(map(str, values)).replace("None", "NULL") + "}"  # str(int) never holds "None"


def _text_array(values: Iterable[str]) -> str:
    """Like :func:`_int_array`, for text (each element double-quoted, backslash-escaped)."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


class LedgerTransaction:
    """Statements inside one open transaction; use :meth:`Ledger.transaction`."""

    def __init__(self, cursor: Any, schema: str) -> None:
        self._cur = cursor
        self.s = quote_schema(schema)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        self._cur.execute(sql.format(s=self.s), params)
        return self._cur

    def fetchone(self, sql: str, params: Sequence[Any] | None = None) -> Row | None:
        row: Row | None = self.execute(sql, params).fetchone()
        return row

    def fetchrow(self, sql: str, params: Sequence[Any] | None = None) -> Row:
        """The one row a statement must return (a missing row is a bug, not bad input)."""
        row = self.fetchone(sql, params)
        if row is None:
            raise LedgerError(f"no row from: {sql.split(' FROM ')[0][:80]}")
        return row

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[Row]:
        return list(self.execute(sql, params).fetchall())

    # pipelines -----------------------------------------------------------------

    def lock_pipeline(self, spec: PipelineSpec) -> tuple[int, int]:
        """Create the pipeline or check that ``spec`` is its stored one, and lock its row.

        Returns (epoch, next batch id). A spec that differs is refused, listing the differences:
        a change is made on purpose (:func:`airflow_kafka_offsets.service.spec_change.change_spec`).
        """
        self.execute(
            "INSERT INTO {s}.pipelines (name, spec) VALUES (%s, %s::jsonb) ON CONFLICT (name) DO NOTHING",
            (spec.name, _jsonb(spec.to_json())),
        )
        epoch, next_batch_id, stored = self.fetchrow(
            "SELECT epoch, next_batch_id, spec FROM {s}.pipelines WHERE name = %s FOR UPDATE", (spec.name,)
        )
        diff = diff_specs(PipelineSpec.from_json(_json(stored)), spec)
        if diff:
            raise PipelineSpecMismatchError(mismatch_message(diff))
        return int(epoch), int(next_batch_id)

    def replace_spec(self, spec: PipelineSpec, detail: Mapping[str, Any], actor: Actor) -> None:
        """Store a changed spec (the caller holds the pipeline lock and has checked the change)."""
        self.execute(
            "UPDATE {s}.pipelines SET spec = %s::jsonb, updated_at = now() WHERE name = %s",
            (_jsonb(spec.to_json()), spec.name),
        )
        self.audit(spec.name, None, "spec_changed", detail, actor)

    def lock_existing_pipeline(self, pipeline: str) -> tuple[int, int]:
        row = self.fetchone("SELECT epoch, next_batch_id FROM {s}.pipelines WHERE name = %s FOR UPDATE", (pipeline,))
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        return int(row[0]), int(row[1])

    def output_root(self, pipeline: str) -> str:
        row = self.fetchone("SELECT spec->>'output_root' FROM {s}.pipelines WHERE name = %s", (pipeline,))
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger: run its plan task first")
        return str(row[0])

    def cursors(self, pipeline: str) -> dict[TopicPartition, int]:
        rows = self.fetchall("SELECT topic, partition, next_offset FROM {s}.cursors WHERE pipeline = %s", (pipeline,))
        return {TopicPartition(t, int(p)): int(o) for t, p, o in rows}

    # batches -------------------------------------------------------------------

    def recent_batches(self, pipeline: str, last: int) -> list[Row]:
        """The ``last`` batches, newest first (the primary key's index): batch_id, kind, state,
        records_planned, records_committed, output_bytes, planned_at, committed_at."""
        return self.fetchall(
            "SELECT batch_id, kind, state, records_planned, records_committed, output_bytes, planned_at, committed_at"
            " FROM {s}.batches WHERE pipeline = %s ORDER BY batch_id DESC LIMIT %s",
            (pipeline, last),
        )

    def batch_ranges(
        self, pipeline: str, batch_ids: Sequence[int], first: int
    ) -> dict[int, tuple[list[PartitionRange], int]]:
        """The ``first`` ranges of each given batch in partition order, and how many it has."""
        ranges: dict[int, tuple[list[PartitionRange], int]] = {int(b): ([], 0) for b in batch_ids}
        for b, t, p, c, s, e, n in self.fetchall(
            # Per batch, along the primary key: the first ranges, and a count (an index-only scan).
            "SELECT b.id, r.topic, r.partition, r.cursor_offset, r.start_offset, r.end_offset, c.n"
            " FROM unnest(%s::bigint[]) AS b(id)"
            " CROSS JOIN LATERAL (SELECT count(*) AS n FROM {s}.batch_ranges WHERE pipeline = %s AND batch_id = b.id) c"
            " CROSS JOIN LATERAL ("
            "  SELECT topic, partition, cursor_offset, start_offset, end_offset FROM {s}.batch_ranges"
            "  WHERE pipeline = %s AND batch_id = b.id ORDER BY topic, partition LIMIT %s) r",
            (list(batch_ids), pipeline, pipeline, first),
        ):
            shown, _ = ranges[int(b)]
            shown.append(PartitionRange(t, int(p), start=int(s), end=int(e), cursor=int(c)))
            ranges[int(b)] = (shown, int(n))
        return ranges

    def pipeline_names(self, limit: int, offset: int = 0) -> tuple[list[str], int]:
        """One page of pipeline names in name order, and how many pipelines there are."""
        names = [
            r[0]
            for r in self.fetchall("SELECT name FROM {s}.pipelines ORDER BY name LIMIT %s OFFSET %s", (limit, offset))
        ]
        return names, int(self.fetchrow("SELECT count(*) FROM {s}.pipelines")[0])

    def planned_batch_id(self, pipeline: str) -> int | None:
        row = self.fetchone("SELECT batch_id FROM {s}.batches WHERE pipeline = %s AND state = 'planned'", (pipeline,))
        return None if row is None else int(row[0])

    def insert_plan(self, plan: BatchPlan, new_cursors: Mapping[TopicPartition, int], actor: Actor) -> None:
        """Write the plan ahead of any work; cursors of first-seen partitions start at the plan's start."""
        self.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned, planned_by)"
            " VALUES (%s, %s, %s, 'planned', %s, %s, %s::jsonb)",
            (plan.pipeline, plan.batch_id, plan.epoch, plan.output_uri, plan.records_planned, _jsonb(actor.to_json())),
        )
        ranges = plan.ranges
        self.execute(
            "INSERT INTO {s}.batch_ranges"
            " (pipeline, batch_id, epoch, topic, partition, cursor_offset, start_offset, end_offset)"
            " SELECT %s, %s, %s, * FROM unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[])",
            (
                plan.pipeline,
                plan.batch_id,
                plan.epoch,
                _text_array(r.topic for r in ranges),
                _int_array(r.partition for r in ranges),
                _int_array(r.cursor for r in ranges),
                _int_array(r.start for r in ranges),
                _int_array(r.end for r in ranges),
            ),
        )
        if new_cursors:
            tps = sorted(new_cursors)
            self.execute(
                "INSERT INTO {s}.cursors (pipeline, topic, partition, next_offset)"
                " SELECT %s, * FROM unnest(%s::text[], %s::int[], %s::bigint[])",
                (
                    plan.pipeline,
                    _text_array(tp.topic for tp in tps),
                    _int_array(tp.partition for tp in tps),
                    _int_array(new_cursors[tp] for tp in tps),
                ),
            )
        self.execute(
            "UPDATE {s}.pipelines SET next_batch_id = %s, updated_at = now() WHERE name = %s",
            (plan.batch_id + 1, plan.pipeline),
        )
        lost = {str(r.topic_partition): [r.cursor, r.start] for r in ranges if r.lost}
        detail: dict[str, Any] = {"records_planned": plan.records_planned, "partitions": len(ranges)}
        if lost:
            detail["lost_to_retention"] = lost
        if new_cursors:
            detail["new_partitions"] = {str(tp): off for tp, off in sorted(new_cursors.items())}
        self.audit(plan.pipeline, plan.batch_id, "planned", detail, actor)

    def batch(self, pipeline: str, batch_id: int, *, for_update: bool = False) -> BatchRecord:
        row = self.fetchone(
            "SELECT epoch, state, output_uri, planned_at, committed_at, records_committed, planned_by, committed_by"
            " FROM {s}.batches WHERE pipeline = %s AND batch_id = %s" + (" FOR UPDATE" if for_update else ""),
            (pipeline, batch_id),
        )
        if row is None:
            raise BatchNotFoundError(f"pipeline {pipeline!r} has no batch {batch_id}")
        epoch, state, output_uri, planned_at, committed_at, records, planned_by, committed_by = row
        ranges = tuple(
            PartitionRange(t, int(p), start=int(s), end=int(e), cursor=int(c))
            for t, p, c, s, e in self.fetchall(
                "SELECT topic, partition, cursor_offset, start_offset, end_offset FROM {s}.batch_ranges"
                " WHERE pipeline = %s AND batch_id = %s ORDER BY topic, partition",
                (pipeline, batch_id),
            )
        )
        return BatchRecord(
            plan=BatchPlan(pipeline, int(batch_id), int(epoch), ranges, output_uri),
            state=BatchState(state),
            planned_at=planned_at,
            committed_at=committed_at,
            records_committed=records,
            planned_by=Actor.from_json(_json(planned_by)),
            committed_by=None if _json(committed_by) is None else Actor.from_json(_json(committed_by)),
        )

    def advance_cursors(self, plan: BatchPlan) -> None:
        """Compare-and-set every cursor from the batch's expected start to its end.

        One statement joins the cursors to the batch's stored ranges, so no offsets are sent again.
        """
        moved: int = self.execute(
            "UPDATE {s}.cursors c SET next_offset = r.end_offset, updated_at = now() FROM {s}.batch_ranges r"
            " WHERE r.pipeline = %s AND r.batch_id = %s AND c.pipeline = r.pipeline AND c.topic = r.topic"
            "   AND c.partition = r.partition AND c.next_offset = r.cursor_offset",
            (plan.pipeline, plan.batch_id),
        ).rowcount
        if moved != len(plan.ranges):
            # The cursors this statement did not move still hold what it found; the ones it moved carry
            # this transaction's time (nothing else in the commit's transaction writes a cursor).
            cursors = {
                TopicPartition(t, int(p)): (int(o), now)
                for t, p, o, now in self.fetchall(
                    "SELECT topic, partition, next_offset, updated_at = now() FROM {s}.cursors WHERE pipeline = %s",
                    (plan.pipeline,),
                )
            }
            detail = ", ".join(
                f"{r.topic_partition} expected {r.cursor} found {found}"
                for r in plan.ranges
                for found, moved_now in [cursors.get(r.topic_partition, (None, False))]
                if not moved_now
            )
            raise CursorMovedError(f"batch {plan.batch_id} of {plan.pipeline!r} cannot commit: cursor moved ({detail})")

    def store_counts(self, plan: BatchPlan, attempt_id: str | None) -> tuple[int, int]:
        """Copy the attempt's per-partition counts from its stored report onto the batch's ranges.

        The report is read inside PostgreSQL (it was checked against the plan before the attempt was
        marked succeeded); ranges it does not list read nothing. Returns (records, output bytes).
        """
        counted = records = output_bytes = 0
        if attempt_id is not None:
            counted, records, output_bytes = self.fetchrow(
                "WITH r AS (SELECT p.* FROM {s}.attempts a CROSS JOIN jsonb_to_recordset(a.report->'partitions')"
                "   AS p(topic text, partition int, records bigint, min_offset bigint, max_offset bigint,"
                "        payload_bytes bigint, decode_errors bigint) WHERE a.attempt_id = %s),"
                " counted AS (UPDATE {s}.batch_ranges b SET records = r.records, min_offset = r.min_offset,"
                "   max_offset = r.max_offset, payload_bytes = coalesce(r.payload_bytes, 0),"
                "   decode_errors = coalesce(r.decode_errors, 0) FROM r"
                "   WHERE b.pipeline = %s AND b.batch_id = %s AND b.topic = r.topic AND b.partition = r.partition"
                "   RETURNING b.records)"
                " SELECT count(*), coalesce(sum(records), 0), (SELECT coalesce((report->>'output_bytes')::bigint, 0)"
                "   FROM {s}.attempts WHERE attempt_id = %s) FROM counted",
                (attempt_id, plan.pipeline, plan.batch_id, attempt_id),
            )
        if counted < len(plan.ranges):
            self.execute(
                "UPDATE {s}.batch_ranges SET records = 0 WHERE pipeline = %s AND batch_id = %s AND records IS NULL",
                (plan.pipeline, plan.batch_id),
            )
        return int(records), int(output_bytes)

    def record_commit(
        self, plan: BatchPlan, attempt_id: str | None, records: int, output_bytes: int, actor: Actor
    ) -> None:
        """Mark the batch committed with its counts (from :meth:`store_counts`) and the attempt's report.

        The attempt's report document is copied inside PostgreSQL, not sent again.
        """
        self.execute(
            "UPDATE {s}.batches SET state = 'committed', committed_at = now(), records_committed = %s,"
            " output_bytes = %s, report = (SELECT report FROM {s}.attempts WHERE attempt_id = %s),"
            " committed_by = %s::jsonb WHERE pipeline = %s AND batch_id = %s AND state = 'planned'",
            (records, output_bytes, attempt_id, _jsonb(actor.to_json()), plan.pipeline, plan.batch_id),
        )
        self.audit(plan.pipeline, plan.batch_id, "committed", {"records": records}, actor)

    def pipeline_uid(self, pipeline: str) -> str:
        row = self.fetchone("SELECT uid FROM {s}.pipelines WHERE name = %s", (pipeline,))
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        return str(row[0])

    def pipeline_spec(self, pipeline: str) -> PipelineSpec:
        row = self.fetchone("SELECT spec FROM {s}.pipelines WHERE name = %s", (pipeline,))
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        return PipelineSpec.from_json(_json(row[0]))

    def apply_reset(
        self, pipeline: str, resets: Sequence[PartitionReset], detail: Mapping[str, Any], actor: Actor
    ) -> int:
        """Record a reset as a committed batch of kind 'reset' and move the cursors; returns its batch id.

        The caller holds the pipeline lock and has checked that no batch is planned.
        """
        epoch, batch_id = self.lock_existing_pipeline(pipeline)
        cursors = self.cursors(pipeline)
        rewind = is_rewind(resets)
        if rewind:
            epoch += 1
        entries = reset_ranges(resets, cursors, new_epoch=rewind)
        self.execute(
            "UPDATE {s}.pipelines SET epoch = %s, next_batch_id = %s, updated_at = now() WHERE name = %s",
            (epoch, batch_id + 1, pipeline),
        )
        self.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, kind, output_uri, records_planned,"
            " records_committed, committed_at, planned_by, committed_by)"
            " VALUES (%s, %s, %s, 'committed', 'reset', '', 0, 0, now(), %s::jsonb, %s::jsonb)",
            (pipeline, batch_id, epoch, _jsonb(actor.to_json()), _jsonb(actor.to_json())),
        )
        self.execute(
            "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
            " start_offset, end_offset, previous_offset, records)"
            " SELECT %s, %s, %s, r.*, 0 FROM unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[],"
            " %s::bigint[]) AS r",
            (
                pipeline,
                batch_id,
                epoch,
                _text_array(r.topic for r, _ in entries),
                _int_array(r.partition for r, _ in entries),
                _int_array(r.cursor for r, _ in entries),
                _int_array(r.start for r, _ in entries),
                _int_array(r.end for r, _ in entries),
                _int_array(prev for _, prev in entries),
            ),
        )
        for reset in resets:
            if reset.before is None:
                self.execute(
                    "INSERT INTO {s}.cursors (pipeline, topic, partition, next_offset) VALUES (%s, %s, %s, %s)",
                    (pipeline, reset.topic, reset.partition, reset.after),
                )
            elif reset.after != reset.before:
                moved = self.execute(
                    "UPDATE {s}.cursors SET next_offset = %s, updated_at = now()"
                    " WHERE pipeline = %s AND topic = %s AND partition = %s AND next_offset = %s",
                    (reset.after, pipeline, reset.topic, reset.partition, reset.before),
                ).rowcount
                if moved != 1:
                    raise CursorMovedError(f"cursor of {reset.topic_partition} moved during the reset")
        self.audit(pipeline, batch_id, "reset", {**detail, "epoch": epoch, "rewind": rewind}, actor)
        return batch_id

    def abort_batch(self, pipeline: str, batch_id: int, reason: str, actor: Actor) -> None:
        """Give up a planned batch: its ranges stop counting, the cursor stays where it is."""
        record = self.batch(pipeline, batch_id, for_update=True)
        raise_for_state(record, BatchState.PLANNED)
        self.execute(
            "UPDATE {s}.batches SET state = 'aborted', aborted_at = now(), abort_reason = %s"
            " WHERE pipeline = %s AND batch_id = %s",
            (reason, pipeline, batch_id),
        )
        self.execute(
            "UPDATE {s}.batch_ranges SET live = false WHERE pipeline = %s AND batch_id = %s", (pipeline, batch_id)
        )
        self.audit(pipeline, batch_id, "aborted", {"reason": reason}, actor)

    def committed_ingest_batches(self, pipeline: str, first: int | None = None, last: int | None = None) -> list[int]:
        rows = self.fetchall(
            "SELECT batch_id FROM {s}.batches WHERE pipeline = %s AND state = 'committed' AND kind = 'ingest'"
            " AND records_planned > 0 AND batch_id >= %s AND (%s::bigint IS NULL OR batch_id <= %s) ORDER BY batch_id",
            (pipeline, first or 0, last, last),
        )
        return [int(r[0]) for r in rows]

    def batches_overlapping(self, pipeline: str, topic: str, partition: int, start: int, end: int) -> list[int]:
        """Committed ingest batches whose read range on a partition overlaps ``[start, end)``."""
        rows = self.fetchall(
            "SELECT DISTINCT r.batch_id FROM {s}.batch_ranges r JOIN {s}.batches b USING (pipeline, batch_id)"
            " WHERE r.pipeline = %s AND r.topic = %s AND r.partition = %s AND b.state = 'committed'"
            " AND b.kind = 'ingest' AND int8range(r.start_offset, r.end_offset) && int8range(%s, %s)"
            " ORDER BY r.batch_id",
            (pipeline, topic, partition, start, end),
        )
        return [int(r[0]) for r in rows]

    def committed_counts(
        self, pipeline: str, batch_id: int
    ) -> dict[TopicPartition, tuple[int, int | None, int | None]]:
        rows = self.fetchall(
            "SELECT topic, partition, records, min_offset, max_offset FROM {s}.batch_ranges"
            " WHERE pipeline = %s AND batch_id = %s",
            (pipeline, batch_id),
        )
        return {TopicPartition(t, int(p)): (int(n or 0), lo, hi) for t, p, n, lo, hi in rows}

    # attempts ------------------------------------------------------------------

    def start_attempt(self, plan: BatchPlan, attempt_id: str, staging_uri: str, actor: Actor, lease_s: float) -> None:
        self.execute(
            "INSERT INTO {s}.attempts (attempt_id, pipeline, batch_id, state, staging_uri, actor, heartbeat_at,"
            " lease_expires_at) VALUES (%s, %s, %s, 'running', %s, %s::jsonb, now(),"
            " now() + make_interval(secs => %s))",
            (attempt_id, plan.pipeline, plan.batch_id, staging_uri, _jsonb(actor.to_json()), float(lease_s)),
        )

    def renew_lease(self, attempt_id: str, lease_s: float) -> bool:
        """Extend a running attempt's lease; False once it is no longer running (declared dead)."""
        renewed: int = self.execute(
            "UPDATE {s}.attempts SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %s)"
            " WHERE attempt_id = %s AND state = 'running'",
            (float(lease_s), attempt_id),
        ).rowcount
        return renewed == 1

    def finish_attempt(self, attempt_id: str, report: BatchReport | None, error: str | None) -> bool:
        """Record how a running attempt ended; False if it had been declared dead meanwhile."""
        finished: int = self.execute(
            "UPDATE {s}.attempts SET state = %s, finished_at = now(), report = %s::jsonb, error = %s"
            " WHERE attempt_id = %s AND state = 'running'",
            ("failed" if error else "succeeded", _jsonb(report.raw) if report else None, error, attempt_id),
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
        """Attempts of the given batches, oldest first (without ``reports``: with no report document)."""
        rows = self.fetchall(
            f"SELECT {_attempt_columns(reports)} FROM {{s}}.attempts"
            " WHERE pipeline = %s AND batch_id = ANY(%s::bigint[]) ORDER BY started_at, attempt_id",
            (pipeline, list(batch_ids)),
        )
        return [_attempt(r) for r in rows]

    def latest_succeeded_attempt(self, pipeline: str, batch_id: int, *, report: bool = True) -> Attempt | None:
        """The attempt a commit takes: the last one that succeeded with a report (without ``report``: returned
        with no report document)."""
        row = self.fetchone(
            f"SELECT {_attempt_columns(report)} FROM {{s}}.attempts"
            " WHERE pipeline = %s AND batch_id = %s AND state = 'succeeded' AND report IS NOT NULL"
            " ORDER BY finished_at DESC LIMIT 1",
            (pipeline, batch_id),
        )
        return None if row is None else _attempt(row)

    def audit(self, pipeline: str, batch_id: int | None, event: str, detail: Mapping[str, Any], actor: Actor) -> None:
        self.execute(
            "INSERT INTO {s}.audit (pipeline, batch_id, event, detail, actor)"
            " VALUES (%s, %s, %s, %s::jsonb, %s::jsonb)",
            (pipeline, batch_id, event, _jsonb(detail), _jsonb(actor.to_json())),
        )


class Ledger:
    """Entry point: migrations and transactions on connections from ``connect``."""

    def __init__(
        self,
        connect: Callable[[], Any],
        schema: str = "kafka_offsets",
        lock_timeout_s: float = 60.0,
        catalog_uri: str | None = None,
    ):
        """``catalog_uri``: the same database as a SQLAlchemy URL, for the Iceberg catalog kept beside the ledger."""
        quote_schema(schema)
        self.schema = schema
        self.catalog_uri = catalog_uri
        self._connect = connect
        self._lock_timeout_ms = int(lock_timeout_s * 1000)
        self._idle: Any = None  # one connection kept between transactions (a task runs about five)
        self._idle_lock = threading.Lock()

    def _checkout(self) -> Any:
        """The idle connection if it still answers, else a new one; either way with the lock timeout set."""
        with self._idle_lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            try:
                conn.cursor().execute(f"SET lock_timeout = {self._lock_timeout_ms}")
                return conn
            except Exception:  # the server restarted or dropped it since: nothing ran on it yet
                _close_quietly(conn)
        conn = self._connect()
        try:
            conn.cursor().execute(f"SET lock_timeout = {self._lock_timeout_ms}")
        except BaseException:
            _close_quietly(conn)
            raise
        return conn

    def _checkin(self, conn: Any) -> None:
        with self._idle_lock:
            conn, self._idle = (conn, None) if self._idle is not None else (None, conn)
        if conn is not None:
            _close_quietly(conn)

    def close(self) -> None:
        """Close the idle connection (transactions open a new one when needed)."""
        with self._idle_lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            _close_quietly(conn)

    @contextmanager
    def transaction(self, read_only: bool = False) -> Iterator[LedgerTransaction]:
        """One transaction: committed on success, rolled back on any error (and its connection dropped).

        ``read_only``: PostgreSQL refuses any write in it (for pages and reports that only look).
        """
        conn = self._checkout()
        try:
            cursor = conn.cursor()
            if read_only:
                cursor.execute("SET TRANSACTION READ ONLY")
            yield LedgerTransaction(cursor, self.schema)
            conn.commit()
        except BaseException as exc:
            try:
                conn.rollback()
            except Exception:  # connection lost (server restart): the server rolled back; report the cause
                pass
            _close_quietly(conn)
            if _sqlstate(exc) == LOCK_NOT_AVAILABLE:
                raise PipelineBusyError(
                    f"gave up after {self._lock_timeout_ms / 1000:.0f}s waiting for a ledger lock held by "
                    "another run of the same pipeline"
                ) from exc
            raise
        self._checkin(conn)

    def schema_version(self) -> int | None:
        with self.transaction() as tx:
            exists = tx.fetchrow("SELECT to_regclass(%s)", (f"{tx.s}.schema_version",))[0]
            if exists is None:
                return None
            row = tx.fetchone("SELECT version FROM {s}.schema_version")
            return None if row is None else int(row[0])

    def migrate(self) -> int:
        """Create or upgrade the ledger schema; safe to call from many runs at once."""
        with self.transaction() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"airflow_kafka_offsets:{self.schema}",))
            tx.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
            tx.execute("CREATE SCHEMA IF NOT EXISTS {s}")
            tx.execute(
                "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
                " singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),"
                " version integer NOT NULL, package_version text NOT NULL,"
                " migrated_at timestamptz NOT NULL DEFAULT now())"
            )
            row = tx.fetchone("SELECT version FROM {s}.schema_version")
            current = 0 if row is None else int(row[0])
            if current > SCHEMA_VERSION:
                raise LedgerSchemaTooNewError(
                    f"ledger schema {self.schema!r} is at version {current}, newer than version {SCHEMA_VERSION} "
                    f"known to airflow-kafka-offsets {__version__}: upgrade the package"
                )
            for statements in MIGRATIONS[current:]:
                for statement in statements:
                    tx.execute(statement)
            tx.execute(
                "INSERT INTO {s}.schema_version (version, package_version) VALUES (%s, %s)"
                " ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version,"
                " package_version = EXCLUDED.package_version, migrated_at = now()"
                " WHERE {s}.schema_version.version < EXCLUDED.version",
                (SCHEMA_VERSION, __version__),
            )
            return SCHEMA_VERSION

    def check_version(self) -> None:
        """Refuse to work on a ledger this package does not know (missing or newer)."""
        version = self.schema_version()
        if version is None or version < SCHEMA_VERSION:
            self.migrate()
        elif version > SCHEMA_VERSION:
            raise LedgerSchemaTooNewError(
                f"ledger schema {self.schema!r} is at version {version}, newer than version {SCHEMA_VERSION} "
                f"known to airflow-kafka-offsets {__version__}: upgrade the package"
            )

    def batch(self, pipeline: str, batch_id: int) -> BatchRecord:
        with self.transaction() as tx:
            return tx.batch(pipeline, batch_id)

    def cursors(self, pipeline: str) -> dict[TopicPartition, int]:
        with self.transaction() as tx:
            return tx.cursors(pipeline)

    def committed_batches(self, pipeline: str) -> list[BatchRecord]:
        with self.transaction() as tx:
            ids = tx.fetchall(
                "SELECT batch_id FROM {s}.batches WHERE pipeline = %s AND state = 'committed' ORDER BY batch_id",
                (pipeline,),
            )
            return [tx.batch(pipeline, int(bid)) for (bid,) in ids]

    def contiguity_problems(self, pipeline: str) -> list[str]:
        """Gaps or overlaps between consecutive committed ranges of each partition (I1); empty when sound."""
        with self.transaction() as tx:
            rows = tx.fetchall(
                "SELECT topic, partition, batch_id, cursor_offset, prev_end FROM ("
                "  SELECT r.topic, r.partition, r.batch_id, r.cursor_offset,"
                "         lag(r.end_offset) OVER (PARTITION BY r.epoch, r.topic, r.partition ORDER BY r.batch_id)"
                "           AS prev_end"
                "  FROM {s}.batch_ranges r JOIN {s}.batches b USING (pipeline, batch_id)"
                "  WHERE r.pipeline = %s AND b.state = 'committed') w"
                " WHERE prev_end IS NOT NULL AND prev_end <> cursor_offset ORDER BY topic, partition, batch_id",
                (pipeline,),
            )
        return [f"{t}-{p} batch {b} starts at {c} but the previous batch ended at {e}" for t, p, b, c, e in rows]


def raise_for_state(record: BatchRecord, wanted: BatchState) -> None:
    if record.state is not wanted:
        raise BatchStateError(
            f"batch {record.plan.batch_id} of {record.plan.pipeline!r} is {record.state.value}, not {wanted.value}"
        )


__all__ = ["Attempt", "BatchRecord", "describe_actor", "Ledger", "LedgerError", "LedgerTransaction", "raise_for_state"]
