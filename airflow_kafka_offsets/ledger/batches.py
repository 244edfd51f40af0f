"""Batches: write-ahead plans and their ranges, what a batch holds, aborts.

A partial unique index allows one planned batch per pipeline, and a statement-level check keeps
live ranges of one epoch from overlapping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchState, PartitionRange, TopicPartition
from airflow_kafka_offsets.errors import BatchNotFoundError, BatchStateError
from airflow_kafka_offsets.ledger.audit import AuditStatements
from airflow_kafka_offsets.ledger.sql import from_json, int_array, jsonb, text_array


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
class BatchSummary:
    """A batch without its ranges, as a list of recent batches shows it. ``tables``: with an Iceberg sink
    or a sink of many tables, the snapshot id or version and the records the batch gave each table."""

    batch_id: int
    kind: str
    state: str
    records_planned: int | None
    records_committed: int | None
    output_bytes: int | None
    planned_at: datetime | None
    committed_at: datetime | None
    tables: dict[str, Any] | None = None


@dataclass(frozen=True)
class RangesShown:
    """The first few ranges of a batch in partition order, and how many it has."""

    ranges: tuple[PartitionRange, ...]
    total: int


def raise_for_state(record: BatchRecord, wanted: BatchState) -> None:
    if record.state is not wanted:
        raise BatchStateError(
            f"batch {record.plan.batch_id} of {record.plan.pipeline!r} is {record.state.value}, not {wanted.value}"
        )


class BatchStatements(AuditStatements):
    def planned_batch_id(self, pipeline: str) -> int | None:
        row = self.fetchone("SELECT batch_id FROM {s}.batches WHERE pipeline = %s AND state = 'planned'", (pipeline,))
        return None if row is None else int(row[0])

    def insert_plan(self, plan: BatchPlan, new_cursors: Mapping[TopicPartition, int], actor: Actor) -> None:
        """Write the plan ahead of any work; cursors of first-seen partitions start at the plan's start."""
        self.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned, planned_by)"
            " VALUES (%s, %s, %s, 'planned', %s, %s, %s::jsonb)",
            (plan.pipeline, plan.batch_id, plan.epoch, plan.output_uri, plan.records_planned, jsonb(actor.to_json())),
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
                text_array(r.topic for r in ranges),
                int_array(r.partition for r in ranges),
                int_array(r.cursor for r in ranges),
                int_array(r.start for r in ranges),
                int_array(r.end for r in ranges),
            ),
        )
        if new_cursors:
            tps = sorted(new_cursors)
            self.execute(
                "INSERT INTO {s}.cursors (pipeline, topic, partition, next_offset)"
                " SELECT %s, * FROM unnest(%s::text[], %s::int[], %s::bigint[])",
                (
                    plan.pipeline,
                    text_array(tp.topic for tp in tps),
                    int_array(tp.partition for tp in tps),
                    int_array(new_cursors[tp] for tp in tps),
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
        committed_by = from_json(committed_by)
        return BatchRecord(
            plan=BatchPlan(pipeline, int(batch_id), int(epoch), ranges, output_uri),
            state=BatchState(state),
            planned_at=planned_at,
            committed_at=committed_at,
            records_committed=records,
            planned_by=Actor.from_json(from_json(planned_by)),
            committed_by=None if committed_by is None else Actor.from_json(committed_by),
        )

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

    def recent_batches(self, pipeline: str, last: int) -> list[BatchSummary]:
        """The ``last`` batches, newest first (the primary key's index)."""
        rows = self.fetchall(
            "SELECT batch_id, kind, state, records_planned, records_committed, output_bytes, planned_at, committed_at,"
            " tables FROM {s}.batches WHERE pipeline = %s ORDER BY batch_id DESC LIMIT %s",
            (pipeline, last),
        )
        return [
            BatchSummary(batch_id, kind, state, planned, committed, size, planned_at, committed_at, from_json(tables))
            for batch_id, kind, state, planned, committed, size, planned_at, committed_at, tables in rows
        ]

    def batch_ranges(self, pipeline: str, batch_ids: Sequence[int], first: int) -> dict[int, RangesShown]:
        """The ``first`` ranges of each given batch in partition order, and how many it has."""
        shown: dict[int, list[PartitionRange]] = {int(b): [] for b in batch_ids}
        totals: dict[int, int] = dict.fromkeys(shown, 0)
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
            shown[int(b)].append(PartitionRange(t, int(p), start=int(s), end=int(e), cursor=int(c)))
            totals[int(b)] = int(n)
        return {b: RangesShown(tuple(ranges), totals[b]) for b, ranges in shown.items()}
