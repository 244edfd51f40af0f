"""An in-memory ledger with the PostgreSQL ledger's semantics, for tests of DAG code and of the state machine.

:class:`MemoryLedger` implements :mod:`~airflow_kafka_offsets.ledger.port` as
:class:`~airflow_kafka_offsets.ledger.store.Ledger` does, and refuses what PostgreSQL refuses with the
same exception classes: a second planned batch of a pipeline and overlapping live ranges (psycopg2's
``UniqueViolation`` and ``ExclusionViolation``, as the partial unique index and the overlap trigger
raise them), a commit whose cursors moved (:class:`~airflow_kafka_offsets.errors.CursorMovedError`), a
write in a read-only transaction (``ReadOnlySqlTransaction``). Transactions are read committed: each
one sees what others committed, its own writes apply together at its end or not at all. Row locks
(a pipeline's, a batch's, an attempt's, a cursor's) are held to the end of the transaction that took
them; another transaction waits for one at most ``lock_timeout_s`` and then gets
:class:`~airflow_kafka_offsets.errors.PipelineBusyError`, as PostgreSQL's lock timeout gives it. Time
is ``clock()``, read once when a transaction starts (PostgreSQL's ``now()``); :class:`ManualClock`
moves only when told, for lease expiry in tests.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg2 import errors as pg_errors

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import (
    BatchPlan,
    BatchReport,
    BatchState,
    DecodeSpec,
    PartitionRange,
    PipelineSpec,
    TopicPartition,
)
from airflow_kafka_offsets.core.output_tables import RecordedTable, recorded_tables
from airflow_kafka_offsets.core.resets import PartitionReset, is_rewind, reset_ranges
from airflow_kafka_offsets.core.spec_diff import diff_specs, mismatch_message
from airflow_kafka_offsets.errors import (
    BatchNotFoundError,
    CursorMovedError,
    LedgerError,
    PipelineBusyError,
    PipelineNotFoundError,
    PipelineSpecMismatchError,
)
from airflow_kafka_offsets.ledger.attempts import Attempt
from airflow_kafka_offsets.ledger.batches import BatchRecord, raise_for_state
from airflow_kafka_offsets.ledger.port import OwnTransactionReads
from airflow_kafka_offsets.ledger.sql import Row

if TYPE_CHECKING:
    from airflow_kafka_offsets.ledger.port import LedgerPort


class ManualClock:
    """A clock that moves only by :meth:`advance` (leases run out when a test says so)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit trail."""

    pipeline: str
    batch_id: int | None
    event: str
    detail: Mapping[str, Any]
    actor: Actor
    at: datetime


@dataclass(frozen=True)
class _Pipeline:
    spec: Mapping[str, Any]  # as stored: PipelineSpec.to_json()
    epoch: int
    next_batch_id: int
    uid: str


@dataclass(frozen=True)
class _Range:
    range: PartitionRange
    epoch: int
    live: bool = True
    records: int | None = None
    min_offset: int | None = None
    max_offset: int | None = None
    payload_bytes: int = 0
    decode_errors: int = 0


@dataclass(frozen=True)
class _Batch:
    pipeline: str
    batch_id: int
    epoch: int
    state: BatchState
    kind: str
    output_uri: str
    records_planned: int
    planned_at: datetime
    planned_by: Actor
    ranges: tuple[_Range, ...]
    committed_at: datetime | None = None
    committed_by: Actor | None = None
    records_committed: int | None = None
    output_bytes: int | None = None
    report: str | None = None
    tables: Mapping[str, Any] | None = None
    decode: DecodeSpec | None = None
    abort_reason: str | None = None


@dataclass(frozen=True)
class _Attempt:
    attempt_id: str
    pipeline: str
    batch_id: int
    state: str
    staging_uri: str
    actor: Actor
    started_at: datetime
    lease_expires_at: datetime | None
    finished_at: datetime | None = None
    report: str | None = None
    error: str | None = None
    root_cause: str | None = None
    order: int = 0  # finish order, for "the last one that succeeded" among equal times


PIPELINES, CURSORS, BATCHES, ATTEMPTS = "pipelines", "cursors", "batches", "attempts"


class MemoryTransaction:
    """One open transaction of a :class:`MemoryLedger`; implements
    :class:`~airflow_kafka_offsets.ledger.port.LedgerTransactionPort`."""

    def __init__(self, ledger: MemoryLedger, read_only: bool) -> None:
        self._ledger = ledger
        self._read_only = read_only
        self.now = ledger.clock()
        self._writes: dict[tuple[str, Hashable], Any] = {}
        self._audit: list[AuditEntry] = []
        self.held: set[tuple[str, Hashable]] = set()

    # rows: this transaction's writes over what is committed
    def _get(self, table: str, key: Hashable) -> Any:
        if (table, key) in self._writes:
            return self._writes[(table, key)]
        return self._ledger.committed_row(table, key)

    def _rows(self, table: str) -> dict[Any, Any]:
        rows = self._ledger.committed_table(table)
        rows.update({k: v for (t, k), v in self._writes.items() if t == table})
        return rows

    def _lock(self, table: str, key: Hashable) -> None:
        self._ledger.acquire(self, (table, key))

    def _put(self, table: str, key: Hashable, row: Any) -> None:
        if self._read_only:
            raise pg_errors.ReadOnlySqlTransaction("cannot execute UPDATE in a read-only transaction")
        self._lock(table, key)
        self._writes[(table, key)] = row

    def commit(self) -> None:
        self._ledger.apply(self._writes, self._audit)

    def audit(self, pipeline: str, batch_id: int | None, event: str, detail: Mapping[str, Any], actor: Actor) -> None:
        if self._read_only:
            raise pg_errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction")
        self._audit.append(
            AuditEntry(pipeline, batch_id, event, json.loads(json.dumps(detail, default=str)), actor, self.now)
        )

    # pipelines and cursors
    def lock_pipeline(self, spec: PipelineSpec) -> tuple[int, int]:
        self._lock(PIPELINES, spec.name)
        row: _Pipeline | None = self._get(PIPELINES, spec.name)
        if row is None:
            row = _Pipeline(spec.to_json(), 0, 1, str(uuid.uuid4()))
            self._put(PIPELINES, spec.name, row)
        diff = diff_specs(PipelineSpec.from_json(dict(row.spec)), spec)
        if diff:
            raise PipelineSpecMismatchError(mismatch_message(diff))
        return row.epoch, row.next_batch_id

    def lock_existing_pipeline(self, pipeline: str) -> tuple[int, int]:
        if self._get(PIPELINES, pipeline) is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        self._lock(PIPELINES, pipeline)
        row = self._pipeline(pipeline)
        return row.epoch, row.next_batch_id

    def _pipeline(self, pipeline: str) -> _Pipeline:
        row: _Pipeline | None = self._get(PIPELINES, pipeline)
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        return row

    def pipeline_spec(self, pipeline: str) -> PipelineSpec:
        return PipelineSpec.from_json(dict(self._pipeline(pipeline).spec))

    def pipeline_uid(self, pipeline: str) -> str:
        return self._pipeline(pipeline).uid

    def cursors(self, pipeline: str) -> dict[TopicPartition, int]:
        return {tp: offset for (p, tp), offset in self._rows(CURSORS).items() if p == pipeline and offset is not None}

    # batches
    def _batches(self, pipeline: str) -> list[_Batch]:
        return sorted((b for (p, _), b in self._rows(BATCHES).items() if p == pipeline), key=lambda b: b.batch_id)

    def planned_batch_id(self, pipeline: str) -> int | None:
        return next((b.batch_id for b in self._batches(pipeline) if b.state is BatchState.PLANNED), None)

    def _insert_batch(self, batch: _Batch) -> None:
        key = (batch.pipeline, batch.batch_id)
        if self._get(BATCHES, key) is not None:
            raise pg_errors.UniqueViolation(
                'duplicate key value violates unique constraint "batches_pkey"\n'
                f"DETAIL:  Key (pipeline, batch_id)=({batch.pipeline}, {batch.batch_id}) already exists.\n"
            )
        if batch.state is BatchState.PLANNED and self.planned_batch_id(batch.pipeline) is not None:
            raise pg_errors.UniqueViolation(
                'duplicate key value violates unique constraint "batches_one_planned"\n'
                f"DETAIL:  Key (pipeline)=({batch.pipeline}) already exists.\n"
            )
        self._lock(PIPELINES, batch.pipeline)  # as the overlap trigger locks it
        self._refuse_overlaps(batch)
        self._put(BATCHES, key, batch)

    def _refuse_overlaps(self, batch: _Batch) -> None:
        """The overlap trigger: a live, non-empty ``[cursor, end)`` may not overlap another batch's of its epoch."""
        others = [b for b in self._batches(batch.pipeline) if b.batch_id != batch.batch_id]
        for new in batch.ranges:
            r = new.range
            if not new.live or r.cursor >= r.end:
                continue
            clashes = sorted(
                (
                    o.range
                    for b in others
                    for o in b.ranges
                    if o.live and o.epoch == new.epoch and o.range.topic_partition == r.topic_partition
                ),
                key=lambda o: o.end,
            )
            for o in clashes:
                if o.cursor < o.end and o.end > r.cursor and o.cursor < r.end:
                    key = "(pipeline, epoch, topic, partition, int8range(cursor_offset, end_offset))"
                    raise pg_errors.ExclusionViolation(
                        'conflicting key value violates exclusion constraint "batch_ranges_no_overlap"\n'
                        f"DETAIL:  Key {key}=({batch.pipeline}, {new.epoch}, {r.topic}, {r.partition}, "
                        f"[{r.cursor},{r.end})) conflicts with existing key {key}=({batch.pipeline}, {new.epoch}, "
                        f"{o.topic}, {o.partition}, [{o.cursor},{o.end})).\n"
                    )

    def insert_plan(self, plan: BatchPlan, new_cursors: Mapping[TopicPartition, int], actor: Actor) -> None:
        batch = _Batch(
            plan.pipeline,
            plan.batch_id,
            plan.epoch,
            BatchState.PLANNED,
            "ingest",
            plan.output_uri,
            plan.records_planned,
            self.now,
            actor,
            tuple(_Range(r, plan.epoch) for r in plan.ranges),
        )
        self._insert_batch(batch)
        for tp, offset in sorted(new_cursors.items()):
            if self._get(CURSORS, (plan.pipeline, tp)) is not None:
                raise pg_errors.UniqueViolation(
                    'duplicate key value violates unique constraint "cursors_pkey"\n'
                    f"DETAIL:  Key (pipeline, topic, partition)=({plan.pipeline}, {tp.topic}, {tp.partition}) "
                    "already exists.\n"
                )
            self._put(CURSORS, (plan.pipeline, tp), offset)
        self._put(PIPELINES, plan.pipeline, replace(self._pipeline(plan.pipeline), next_batch_id=plan.batch_id + 1))
        lost = {str(r.topic_partition): [r.cursor, r.start] for r in plan.ranges if r.lost}
        detail: dict[str, Any] = {"records_planned": plan.records_planned, "partitions": len(plan.ranges)}
        if lost:
            detail["lost_to_retention"] = lost
        if new_cursors:
            detail["new_partitions"] = {str(tp): off for tp, off in sorted(new_cursors.items())}
        self.audit(plan.pipeline, plan.batch_id, "planned", detail, actor)

    def _batch(self, pipeline: str, batch_id: int) -> _Batch:
        row: _Batch | None = self._get(BATCHES, (pipeline, batch_id))
        if row is None:
            raise BatchNotFoundError(f"pipeline {pipeline!r} has no batch {batch_id}")
        return row

    def batch(self, pipeline: str, batch_id: int, *, for_update: bool = False) -> BatchRecord:
        if for_update:
            self._batch(pipeline, batch_id)
            self._lock(BATCHES, (pipeline, batch_id))
        row = self._batch(pipeline, batch_id)
        ranges = tuple(sorted((r.range for r in row.ranges), key=lambda r: (r.topic, r.partition)))
        return BatchRecord(
            plan=BatchPlan(pipeline, batch_id, row.epoch, ranges, row.output_uri),
            state=row.state,
            planned_at=row.planned_at,
            committed_at=row.committed_at,
            records_committed=row.records_committed,
            planned_by=row.planned_by,
            committed_by=row.committed_by,
        )

    def abort_batch(self, pipeline: str, batch_id: int, reason: str, actor: Actor) -> None:
        raise_for_state(self.batch(pipeline, batch_id, for_update=True), BatchState.PLANNED)
        row = self._batch(pipeline, batch_id)
        ranges = tuple(replace(r, live=False) for r in row.ranges)
        self._put(
            BATCHES, (pipeline, batch_id), replace(row, state=BatchState.ABORTED, abort_reason=reason, ranges=ranges)
        )
        self.audit(pipeline, batch_id, "aborted", {"reason": reason}, actor)

    def committed_batch_ids(self, pipeline: str) -> list[int]:
        return [b.batch_id for b in self._batches(pipeline) if b.state is BatchState.COMMITTED]

    def recorded_tables(self, pipeline: str) -> dict[str, RecordedTable]:
        committed = [b for b in self._batches(pipeline) if b.state is BatchState.COMMITTED]
        since = max((b.batch_id for b in committed if b.kind == "reset"), default=0)
        return recorded_tables((b.batch_id, b.tables) for b in committed if b.kind == "ingest" and b.batch_id > since)

    def contiguity_problems(self, pipeline: str) -> list[str]:
        ends: dict[tuple[int, str, int], int] = {}
        problems: list[tuple[str, int, int, str]] = []
        for b in self._batches(pipeline):
            if b.state is not BatchState.COMMITTED:
                continue
            for r in b.ranges:
                key = (r.epoch, r.range.topic, r.range.partition)
                if key in ends and ends[key] != r.range.cursor:
                    problems.append(
                        (
                            r.range.topic,
                            r.range.partition,
                            b.batch_id,
                            f"{r.range.topic}-{r.range.partition} batch {b.batch_id} starts at {r.range.cursor} "
                            f"but the previous batch ended at {ends[key]}",
                        )
                    )
                ends[key] = r.range.end
        return [message for *_, message in sorted(problems)]

    # the decoding a batch was planned with
    def record_batch_decode(self, pipeline: str, batch_id: int, decode: DecodeSpec) -> None:
        row: _Batch | None = self._get(BATCHES, (pipeline, batch_id))
        if row is None or row.state is not BatchState.PLANNED:
            raise BatchNotFoundError(
                f"pipeline {pipeline!r} has no planned batch {batch_id} to record its decoding with"
            )
        stored = DecodeSpec.from_json(json.loads(json.dumps(decode.batch_json(), sort_keys=True)))
        self._put(BATCHES, (pipeline, batch_id), replace(row, decode=stored))

    def batch_decode(self, pipeline: str, batch_id: int) -> DecodeSpec | None:
        return self._batch(pipeline, batch_id).decode

    def last_recorded_decode(self, pipeline: str) -> tuple[int, DecodeSpec] | None:
        for b in reversed(self._batches(pipeline)):
            if b.decode is not None and b.state is not BatchState.ABORTED:
                return b.batch_id, b.decode
        return None

    # attempts and leases
    def start_attempt(self, plan: BatchPlan, attempt_id: str, staging_uri: str, actor: Actor, lease_s: float) -> None:
        self._batch(plan.pipeline, plan.batch_id)  # the attempt's batch must exist (its foreign key)
        if self._get(ATTEMPTS, attempt_id) is not None:
            raise pg_errors.UniqueViolation(
                f'duplicate key value violates unique constraint "attempts_pkey" ({attempt_id})'
            )
        lease = self.now + timedelta(seconds=lease_s)
        attempt = _Attempt(attempt_id, plan.pipeline, plan.batch_id, "running", staging_uri, actor, self.now, lease)
        self._put(ATTEMPTS, attempt_id, attempt)

    def _leased(self, attempt_id: str) -> _Attempt | None:
        """The attempt while it runs with an unexpired lease (a lapsed lease is never revived), locked."""

        def holds(row: _Attempt | None) -> bool:
            return (
                row is not None
                and row.state == "running"
                and row.lease_expires_at is not None
                and (row.lease_expires_at > self.now)
            )

        if not holds(self._get(ATTEMPTS, attempt_id)):
            return None
        self._lock(ATTEMPTS, attempt_id)
        row: _Attempt | None = self._get(ATTEMPTS, attempt_id)  # as it is once locked
        return row if holds(row) else None

    def renew_lease(self, attempt_id: str, lease_s: float) -> bool:
        row = self._leased(attempt_id)
        if row is None:
            return False
        self._put(ATTEMPTS, attempt_id, replace(row, lease_expires_at=self.now + timedelta(seconds=lease_s)))
        return True

    def finish_attempt(
        self, attempt_id: str, report: BatchReport | None, error: str | None, root_cause: str | None = None
    ) -> bool:
        row = self._leased(attempt_id)
        if row is None:
            return False
        document = json.dumps(report.raw, sort_keys=True) if report else None
        finished = replace(
            row,
            state="failed" if error else "succeeded",
            finished_at=self.now,
            report=document,
            error=error,
            root_cause=root_cause,
            order=self._ledger.next_order(),
        )
        self._put(ATTEMPTS, attempt_id, finished)
        return True

    def mark_dead_attempts(
        self, pipeline: str, batch_id: int | None = None, superseded_by: Actor | None = None
    ) -> list[str]:
        actor = superseded_by or Actor()
        same_task = actor.try_number is not None and actor.run_id is not None
        dead = []
        for attempt_id, row in sorted(self._rows(ATTEMPTS).items()):
            if (
                row.pipeline != pipeline
                or (batch_id is not None and row.batch_id != batch_id)
                or row.state != "running"
            ):
                continue
            expired = row.lease_expires_at is None or row.lease_expires_at <= self.now
            earlier_try = (
                same_task
                and (row.actor.dag_id, row.actor.run_id, row.actor.task_id)
                == (actor.dag_id, actor.run_id, actor.task_id)
                and row.actor.map_index == actor.map_index
                and row.actor.try_number is not None
                and actor.try_number is not None
                and row.actor.try_number < actor.try_number
            )
            if not (expired or earlier_try):
                continue
            if row.lease_expires_at is None:
                error = "no lease (started by an older version)"
            elif row.lease_expires_at <= self.now:
                error = f"lease expired at {row.lease_expires_at}"
            else:
                error = "superseded by a later try of its task"
            self._put(ATTEMPTS, attempt_id, replace(row, state="dead", finished_at=self.now, error=error))
            dead.append(attempt_id)
        return dead

    def _attempt(self, row: _Attempt, report: bool) -> Attempt:
        left = None if row.lease_expires_at is None else (row.lease_expires_at - self.now).total_seconds()
        return Attempt(
            row.attempt_id,
            row.pipeline,
            row.batch_id,
            row.state,
            row.staging_uri,
            row.report if report else None,
            row.actor,
            row.started_at,
            row.finished_at,
            row.lease_expires_at,
            left,
            row.error,
            row.root_cause if report else None,
        )

    def attempts(self, pipeline: str, batch_ids: Sequence[int], *, reports: bool = True) -> list[Attempt]:
        rows = [r for r in self._rows(ATTEMPTS).values() if r.pipeline == pipeline and r.batch_id in set(batch_ids)]
        return [self._attempt(r, reports) for r in sorted(rows, key=lambda r: (r.started_at, r.attempt_id))]

    def latest_succeeded_attempt(self, pipeline: str, batch_id: int, *, report: bool = True) -> Attempt | None:
        rows = [
            r
            for r in self._rows(ATTEMPTS).values()
            if (r.pipeline, r.batch_id, r.state) == (pipeline, batch_id, "succeeded") and r.report is not None
        ]
        latest = max(rows, key=lambda r: (r.finished_at, r.order), default=None)
        return None if latest is None else self._attempt(latest, report)

    # the commit
    def store_counts(self, plan: BatchPlan, attempt_id: str | None) -> tuple[int, int]:
        row = self._batch(plan.pipeline, plan.batch_id)
        counts: dict[tuple[str, int], Mapping[str, Any]] = {}
        output_bytes = 0
        if attempt_id is not None:
            attempt: _Attempt | None = self._get(ATTEMPTS, attempt_id)
            if attempt is not None and attempt.report is not None:
                document = json.loads(attempt.report)
                counts = {(p["topic"], int(p["partition"])): p for p in document.get("partitions", [])}
                output_bytes = int(document.get("output_bytes") or 0)
        ranges, records = [], 0
        for r in row.ranges:
            p = counts.get((r.range.topic, r.range.partition))
            if p is not None:
                records += int(p["records"])
                r = replace(
                    r,
                    records=int(p["records"]),
                    min_offset=p.get("min_offset"),
                    max_offset=p.get("max_offset"),
                    payload_bytes=int(p.get("payload_bytes") or 0),
                    decode_errors=int(p.get("decode_errors") or 0),
                )
            elif r.records is None:
                r = replace(r, records=0)
            ranges.append(r)
        self._put(BATCHES, (plan.pipeline, plan.batch_id), replace(row, ranges=tuple(ranges)))
        return records, output_bytes if attempt_id is not None else 0

    def advance_cursors(self, plan: BatchPlan) -> None:
        """Compare-and-set every cursor from the batch's stored start to its end (I3)."""
        moved: set[TopicPartition] = set()
        for r in self._batch(plan.pipeline, plan.batch_id).ranges:
            key = (plan.pipeline, r.range.topic_partition)
            if self._get(CURSORS, key) is None:
                continue
            self._lock(CURSORS, key)
            if self._get(CURSORS, key) == r.range.cursor:
                self._put(CURSORS, key, r.range.end)
                moved.add(r.range.topic_partition)
        if len(moved) != len(plan.ranges):
            cursors = self.cursors(plan.pipeline)
            detail = ", ".join(
                f"{r.topic_partition} expected {r.cursor} found {cursors.get(r.topic_partition)}"
                for r in plan.ranges
                if r.topic_partition not in moved
            )
            raise CursorMovedError(f"batch {plan.batch_id} of {plan.pipeline!r} cannot commit: cursor moved ({detail})")

    def record_commit(
        self,
        plan: BatchPlan,
        attempt_id: str | None,
        records: int,
        output_bytes: int,
        actor: Actor,
        tables: Mapping[str, Any] | None = None,
    ) -> None:
        row = self._batch(plan.pipeline, plan.batch_id)
        self._lock(BATCHES, (plan.pipeline, plan.batch_id))
        row = self._batch(plan.pipeline, plan.batch_id)
        if row.state is BatchState.PLANNED:
            attempt: _Attempt | None = None if attempt_id is None else self._get(ATTEMPTS, attempt_id)
            committed = replace(
                row,
                state=BatchState.COMMITTED,
                committed_at=self.now,
                records_committed=records,
                output_bytes=output_bytes,
                report=None if attempt is None else attempt.report,
                committed_by=actor,
                tables=row.tables if tables is None else dict(tables),
            )
            self._put(BATCHES, (plan.pipeline, plan.batch_id), committed)
        detail: dict[str, Any] = {"records": records} | ({"tables": dict(tables)} if tables else {})
        self.audit(plan.pipeline, plan.batch_id, "committed", detail, actor)

    # resets
    def apply_reset(
        self, pipeline: str, resets: Sequence[PartitionReset], detail: Mapping[str, Any], actor: Actor
    ) -> int:
        epoch, batch_id = self.lock_existing_pipeline(pipeline)
        cursors = self.cursors(pipeline)
        rewind = is_rewind(resets)
        if rewind:
            epoch += 1
        entries = reset_ranges(resets, cursors, new_epoch=rewind)
        self._put(PIPELINES, pipeline, replace(self._pipeline(pipeline), epoch=epoch, next_batch_id=batch_id + 1))
        batch = _Batch(
            pipeline,
            batch_id,
            epoch,
            BatchState.COMMITTED,
            "reset",
            "",
            0,
            self.now,
            actor,
            tuple(_Range(r, epoch, records=0) for r, _ in entries),
            committed_at=self.now,
            committed_by=actor,
            records_committed=0,
        )
        self._insert_batch(batch)
        for reset in resets:
            key = (pipeline, reset.topic_partition)
            if reset.before is None:
                if self._get(CURSORS, key) is not None:
                    raise pg_errors.UniqueViolation('duplicate key value violates unique constraint "cursors_pkey"')
                self._put(CURSORS, key, reset.after)
            elif reset.after != reset.before:
                self._lock(CURSORS, key)
                if self._get(CURSORS, key) != reset.before:
                    raise CursorMovedError(f"cursor of {reset.topic_partition} moved during the reset")
                self._put(CURSORS, key, reset.after)
        self.audit(pipeline, batch_id, "reset", {**detail, "epoch": epoch, "rewind": rewind}, actor)
        return batch_id

    # a sink's statements
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        raise LedgerError(
            "the in-memory ledger runs no SQL: a sink that commits inside the ledger's transaction (Iceberg in the "
            "ledger's catalog) needs the PostgreSQL ledger"
        )

    def fetchone(self, sql: str, params: Sequence[Any] | None = None) -> Row | None:
        return self.execute(sql, params)  # type: ignore[no-any-return]


class MemoryLedger(OwnTransactionReads):
    """A ledger in this process's memory; implements :class:`~airflow_kafka_offsets.ledger.port.LedgerPort`."""

    def __init__(self, clock: Callable[[], datetime] | None = None, lock_timeout_s: float = 0.0) -> None:
        """``lock_timeout_s``: how long a transaction waits for a row lock another one holds (0: not at all,
        as a test that interleaves two runs on one thread needs)."""
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self.lock_timeout_s = lock_timeout_s
        self._tables: dict[str, dict[Any, Any]] = {PIPELINES: {}, CURSORS: {}, BATCHES: {}, ATTEMPTS: {}}
        self._audit: list[AuditEntry] = []
        self._locks: dict[tuple[str, Hashable], MemoryTransaction] = {}
        self._changed = threading.Condition()
        self._order = itertools.count(1)

    # what transactions share
    def committed_row(self, table: str, key: Hashable) -> Any:
        with self._changed:
            return self._tables[table].get(key)

    def committed_table(self, table: str) -> dict[Any, Any]:
        with self._changed:
            return dict(self._tables[table])

    def next_order(self) -> int:
        return next(self._order)

    def acquire(self, tx: MemoryTransaction, key: tuple[str, Hashable]) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self._locks.get(key, tx) is tx, timeout=self.lock_timeout_s):
                raise PipelineBusyError(
                    f"gave up after {self.lock_timeout_s:.0f}s waiting for a ledger lock held by "
                    "another run of the same pipeline"
                )
            self._locks[key] = tx
            tx.held.add(key)

    def _release(self, tx: MemoryTransaction) -> None:
        with self._changed:
            for key in tx.held:
                del self._locks[key]
            tx.held.clear()
            self._changed.notify_all()

    def apply(self, writes: Mapping[tuple[str, Hashable], Any], audit: Sequence[AuditEntry]) -> None:
        with self._changed:
            for (table, key), row in writes.items():
                self._tables[table][key] = row
            self._audit.extend(audit)

    @contextmanager
    def transaction(self, read_only: bool = False) -> Iterator[MemoryTransaction]:
        """One transaction: its writes apply at the end on success, none of them on any error."""
        tx = MemoryTransaction(self, read_only)
        try:
            yield tx
            tx.commit()
        finally:
            self._release(tx)

    def audit_entries(self, pipeline: str) -> list[AuditEntry]:
        """The pipeline's audit trail, oldest first."""
        with self._changed:
            return [e for e in self._audit if e.pipeline == pipeline]


if TYPE_CHECKING:  # mypy checks that both ledgers implement the port (their transactions with them)
    from airflow_kafka_offsets.ledger.store import Ledger

    def _implement(twin: MemoryLedger, postgres: Ledger) -> tuple[LedgerPort, LedgerPort]:
        return twin, postgres
