"""The audit trail: one row per event (planned, committed, reset, aborted, replay, swept...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.ledger.sql import Statements, jsonb


class AuditStatements(Statements):
    def audit(self, pipeline: str, batch_id: int | None, event: str, detail: Mapping[str, Any], actor: Actor) -> None:
        self.execute(
            "INSERT INTO {s}.audit (pipeline, batch_id, event, detail, actor)"
            " VALUES (%s, %s, %s, %s::jsonb, %s::jsonb)",
            (pipeline, batch_id, event, jsonb(detail), jsonb(actor.to_json())),
        )
