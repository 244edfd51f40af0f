"""A pipeline's history as the ledger already holds it: one row per committed batch, for charts.

No metrics are stored for this: a batch's plan row says when it was planned and (its ranges) how
many offsets it was planned over from the cursor, its commit row when it committed and its ranges
what it read (:mod:`airflow_kafka_offsets.core.history` shapes the rows into series).
"""

from __future__ import annotations

from datetime import datetime

from airflow_kafka_offsets.core.history import BatchPoint
from airflow_kafka_offsets.ledger.sql import Statements


class HistoryStatements(Statements):
    def batch_history(self, pipeline: str, since: datetime, last: int) -> list[BatchPoint]:
        """Committed batches planned at or after ``since``, at most the newest ``last``, oldest first.

        Walks the primary key's index backwards from the newest batch and stops at ``last``.
        """
        rows = self.fetchall(
            "SELECT b.batch_id, b.kind, b.planned_at, b.committed_at, coalesce(b.records_committed, 0),"
            " r.payload_bytes, r.offsets"
            " FROM {s}.batches b CROSS JOIN LATERAL ("
            "  SELECT coalesce(sum(payload_bytes), 0) AS payload_bytes, coalesce(sum(end_offset - cursor_offset), 0)"
            "  AS offsets FROM {s}.batch_ranges WHERE pipeline = b.pipeline AND batch_id = b.batch_id) r"
            " WHERE b.pipeline = %s AND b.state = 'committed' AND b.planned_at >= %s"
            " ORDER BY b.batch_id DESC LIMIT %s",
            (pipeline, since, last),
        )
        return [
            BatchPoint(int(b), str(k), p, c, int(n), int(size), int(offsets))
            for b, k, p, c, n, size, offsets in reversed(rows)
        ]
