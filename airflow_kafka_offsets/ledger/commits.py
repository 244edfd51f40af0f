"""Commits, and what committed batches hold.

The commit is a compare-and-set on the cursors inside the transaction that marks the batch
committed (I3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, TopicPartition
from airflow_kafka_offsets.core.output_tables import TABLE_UUID, RecordedTable
from airflow_kafka_offsets.errors import CursorMovedError
from airflow_kafka_offsets.ledger.audit import AuditStatements
from airflow_kafka_offsets.ledger.sql import from_json, jsonb


@dataclass(frozen=True)
class CommittedCount:
    """What a committed batch read of one partition: records, and their lowest and highest offsets."""

    records: int
    min_offset: int | None
    max_offset: int | None


@dataclass(frozen=True)
class CommittedOutput:
    """One committed batch's output: ``uri`` as stored in the ledger, ``path`` for local readers.

    ``tables``: with an Iceberg sink or a sink of many tables, what the batch's commit produced in each
    table it touched (``{"ns.t": {"snapshot_id": ..., "records": ..., "table_uuid": ...}}`` for Iceberg,
    ``"version"`` for Delta).
    """

    batch_id: int
    uri: str
    records: int
    committed_at: datetime
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return urlparse(self.uri).path if self.uri.startswith("file:") else self.uri


class CommitStatements(AuditStatements):
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
        self,
        plan: BatchPlan,
        attempt_id: str | None,
        records: int,
        output_bytes: int,
        actor: Actor,
        tables: Mapping[str, Any] | None = None,
    ) -> None:
        """Mark the batch committed with its counts (from :meth:`store_counts`) and the attempt's report,
        and with ``tables`` what an Iceberg sink or a sink of many tables produced in each table.

        The attempt's report document is copied inside PostgreSQL, not sent again.
        """
        with_tables = "" if tables is None else ", tables = %s::jsonb"  # only table sinks set it
        self.execute(
            "UPDATE {s}.batches SET state = 'committed', committed_at = now(), records_committed = %s,"
            " output_bytes = %s, report = (SELECT report FROM {s}.attempts WHERE attempt_id = %s),"
            f" committed_by = %s::jsonb{with_tables} WHERE pipeline = %s AND batch_id = %s AND state = 'planned'",
            (
                records,
                output_bytes,
                attempt_id,
                jsonb(actor.to_json()),
                *(() if tables is None else (jsonb(dict(tables)),)),
                plan.pipeline,
                plan.batch_id,
            ),
        )
        detail: dict[str, Any] = {"records": records} | ({"tables": dict(tables)} if tables else {})
        self.audit(plan.pipeline, plan.batch_id, "committed", detail, actor)

    def record_tables(self, pipeline: str, batch_id: int, tables: Mapping[str, Any]) -> None:
        """A replay's new snapshots or versions of the tables it rewrote."""
        self.execute(
            "UPDATE {s}.batches SET tables = coalesce(tables, '{{}}'::jsonb) || %s::jsonb"
            " WHERE pipeline = %s AND batch_id = %s",
            (jsonb(dict(tables)), pipeline, batch_id),
        )

    def committed_batch_ids(self, pipeline: str) -> list[int]:
        """Every committed batch, ingest and reset, in batch order."""
        rows = self.fetchall(
            "SELECT batch_id FROM {s}.batches WHERE pipeline = %s AND state = 'committed' ORDER BY batch_id",
            (pipeline,),
        )
        return [int(r[0]) for r in rows]

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

    def committed_counts(self, pipeline: str, batch_id: int) -> dict[TopicPartition, CommittedCount]:
        rows = self.fetchall(
            "SELECT topic, partition, records, min_offset, max_offset FROM {s}.batch_ranges"
            " WHERE pipeline = %s AND batch_id = %s",
            (pipeline, batch_id),
        )
        return {TopicPartition(t, int(p)): CommittedCount(int(n or 0), lo, hi) for t, p, n, lo, hi in rows}

    def committed_topics(self, pipeline: str) -> list[str]:
        """The topics that committed batches read records of."""
        rows = self.fetchall(
            "SELECT DISTINCT r.topic FROM {s}.batch_ranges r JOIN {s}.batches b USING (pipeline, batch_id)"
            " WHERE r.pipeline = %s AND b.state = 'committed' AND r.records > 0 ORDER BY r.topic",
            (pipeline,),
        )
        return [str(r[0]) for r in rows]

    def committed_outputs(self, pipeline: str, after_batch: int = 0) -> list[CommittedOutput]:
        """The outputs of committed ingest batches after ``after_batch``, in batch order (resets have none)."""
        rows = self.fetchall(
            "SELECT batch_id, output_uri, records_committed, committed_at, tables FROM {s}.batches"
            " WHERE pipeline = %s AND state = 'committed' AND kind = 'ingest' AND batch_id > %s ORDER BY batch_id",
            (pipeline, after_batch),
        )
        return [CommittedOutput(int(b), uri, int(n or 0), at, from_json(t) or {}) for b, uri, n, at, t in rows]

    def recorded_tables(self, pipeline: str) -> dict[str, RecordedTable]:
        """Per table, the latest committed ingest batch after the pipeline's latest reset whose entry for it
        records the table's uuid (core/output_tables.py)."""
        rows = self.fetchall(
            "SELECT DISTINCT ON (t.key) t.key, b.batch_id, t.value ->> %s FROM {s}.batches b, jsonb_each(b.tables) t"
            " WHERE b.pipeline = %s AND b.state = 'committed' AND b.kind = 'ingest' AND t.value ->> %s IS NOT NULL"
            "   AND b.batch_id > (SELECT coalesce(max(batch_id), 0) FROM {s}.batches"
            "                     WHERE pipeline = %s AND state = 'committed' AND kind = 'reset')"
            " ORDER BY t.key, b.batch_id DESC",
            (TABLE_UUID, pipeline, TABLE_UUID, pipeline),
        )
        return {str(t): RecordedTable(str(t), int(b), str(u)) for t, b, u in rows}

    def contiguity_problems(self, pipeline: str) -> list[str]:
        """Gaps or overlaps between consecutive committed ranges of each partition (I1); empty when sound."""
        rows = self.fetchall(
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
