"""Pipelines, their specs and cursors.

The pipeline row lock serialises planning, resets and spec changes of one pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import PipelineSpec, TopicPartition
from airflow_kafka_offsets.core.spec_diff import diff_specs, mismatch_message
from airflow_kafka_offsets.errors import PipelineNotFoundError, PipelineSpecMismatchError
from airflow_kafka_offsets.ledger.audit import AuditStatements
from airflow_kafka_offsets.ledger.sql import from_json, jsonb


class PipelineStatements(AuditStatements):
    def lock_pipeline(self, spec: PipelineSpec) -> tuple[int, int]:
        """Create the pipeline or check that ``spec`` is its stored one, and lock its row.

        Returns (epoch, next batch id). A spec that differs is refused, listing the differences:
        a change is made on purpose (:func:`airflow_kafka_offsets.service.operations.change_spec.change_spec`).
        """
        self.execute(
            "INSERT INTO {s}.pipelines (name, spec) VALUES (%s, %s::jsonb) ON CONFLICT (name) DO NOTHING",
            (spec.name, jsonb(spec.to_json())),
        )
        epoch, next_batch_id, stored = self.fetchrow(
            "SELECT epoch, next_batch_id, spec FROM {s}.pipelines WHERE name = %s FOR UPDATE", (spec.name,)
        )
        diff = diff_specs(PipelineSpec.from_json(from_json(stored)), spec)
        if diff:
            raise PipelineSpecMismatchError(mismatch_message(diff))
        return int(epoch), int(next_batch_id)

    def replace_spec(self, spec: PipelineSpec, detail: Mapping[str, Any], actor: Actor) -> None:
        """Store a changed spec (the caller holds the pipeline lock and has checked the change)."""
        self.execute(
            "UPDATE {s}.pipelines SET spec = %s::jsonb, updated_at = now() WHERE name = %s",
            (jsonb(spec.to_json()), spec.name),
        )
        self.audit(spec.name, None, "spec_changed", detail, actor)

    def lock_existing_pipeline(self, pipeline: str) -> tuple[int, int]:
        """Lock the pipeline's row; returns (epoch, next batch id)."""
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

    def pipeline_names(self, limit: int, offset: int = 0) -> tuple[list[str], int]:
        """One page of pipeline names in name order, and how many pipelines there are."""
        names = [
            r[0]
            for r in self.fetchall("SELECT name FROM {s}.pipelines ORDER BY name LIMIT %s OFFSET %s", (limit, offset))
        ]
        return names, int(self.fetchrow("SELECT count(*) FROM {s}.pipelines")[0])

    def pipeline_uid(self, pipeline: str) -> str:
        row = self.fetchone("SELECT uid FROM {s}.pipelines WHERE name = %s", (pipeline,))
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        return str(row[0])

    def pipeline_spec(self, pipeline: str) -> PipelineSpec:
        row = self.fetchone("SELECT spec FROM {s}.pipelines WHERE name = %s", (pipeline,))
        if row is None:
            raise PipelineNotFoundError(f"pipeline {pipeline!r} is not in the ledger")
        return PipelineSpec.from_json(from_json(row[0]))
