"""Resets: a deliberate skip or rewind of cursors, recorded as a committed batch of kind 'reset' (I1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.resets import PartitionReset, is_rewind, reset_ranges
from airflow_kafka_offsets.errors import CursorMovedError
from airflow_kafka_offsets.ledger.pipelines import PipelineStatements
from airflow_kafka_offsets.ledger.sql import int_array, jsonb, text_array


class ResetStatements(PipelineStatements):
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
            (pipeline, batch_id, epoch, jsonb(actor.to_json()), jsonb(actor.to_json())),
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
                text_array(r.topic for r, _ in entries),
                int_array(r.partition for r, _ in entries),
                int_array(r.cursor for r, _ in entries),
                int_array(r.start for r, _ in entries),
                int_array(r.end for r, _ in entries),
                int_array(prev for _, prev in entries),
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
