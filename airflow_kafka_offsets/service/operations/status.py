"""status: cursor, Kafka bounds and lag per partition, recent batches and attempts, any batch in flight."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.status import OPERATION
from airflow_kafka_offsets.core.tables import Column, rows_table
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations.result import OperationResult
from airflow_kafka_offsets.service.status import (
    attempt_counts,
    attempt_status,
    batch_status,
    batch_tables_text,
    lagging_cursors,
    partition_statuses,
    shown_partitions,
)

__all__ = ["OPERATION", "handle", "pipeline_status", "render_status"]


def pipeline_status(ctx: OperationContext, pipeline: str, last: int = 10) -> dict[str, Any]:
    """Cursor, Kafka bounds and lag (records and time) per partition; recent batches; any batch in flight."""
    ledger, kafka = ctx.ledger, ctx.kafka
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
        cursors = tx.cursors(pipeline)
        planned = tx.planned_batch_id(pipeline)
        in_flight = tx.batch(pipeline, planned) if planned is not None else None
        batches = tx.recent_batches(pipeline, last)
        attempts = tx.attempts(pipeline, [b.batch_id for b in batches])
    offsets = kafka.offsets(spec.topics)
    shown = shown_partitions(spec.topics, cursors, offsets)
    oldest_unread = kafka.timestamps_at(lagging_cursors(shown, cursors, offsets))
    retention = kafka.retention(spec.topics)
    now = datetime.now(UTC)
    partitions = [p.to_json() for p in partition_statuses(shown, cursors, offsets, oldest_unread, now, retention)]
    deletable = [p["deletable_in_s"] for p in partitions if p["deletable_in_s"] is not None]
    return {
        "pipeline": pipeline,
        "topics": list(spec.topics),
        "output_root": spec.output_root,
        "sink": ctx.sinks.for_spec(ledger, spec).describe(),
        "partitions": partitions,
        "lag_records_total": sum(p["lag_records"] or 0 for p in partitions),
        "deletable_in_s": min(deletable, default=None),  # the soonest retention may delete unread records
        "in_flight": None
        if in_flight is None
        else {
            "batch_id": in_flight.plan.batch_id,
            "planned_at": in_flight.planned_at.isoformat(),
            "records_planned": in_flight.plan.records_planned,
            "planned_by": in_flight.planned_by.to_json(),
        },
        "batches": [batch_status(b) for b in batches],
        "attempts": [attempt_status(a) for a in attempts],
        "attempt_counts": attempt_counts(attempts),
    }


_PARTITIONS: tuple[Column, ...] = (
    ("partition", lambda p: f"{p['topic']}-{p['partition']}"),
    ("committed", "committed_offset"),
    ("log start", "log_start_offset"),
    ("log end", "log_end_offset"),
    ("lag", "lag_records"),
    ("lag (s)", "lag_seconds"),
    ("deletable in (s)", "deletable_in_s"),
)
_BATCHES: tuple[Column, ...] = (
    ("batch", "batch_id"),
    ("kind", "kind"),
    ("state", "state"),
    ("planned", "records_planned"),
    ("committed", "records_committed"),
    ("bytes", "output_bytes"),
    ("at", lambda b: b["committed_at"] or b["planned_at"]),
)
_ATTEMPTS: tuple[Column, ...] = (
    ("attempt", lambda a: a["attempt_id"][:12]),
    ("batch", "batch_id"),
    ("state", "state"),
    ("run", "run_id"),
    ("started", "started_at"),
    ("ended / lease until", lambda a: a["finished_at"] or a["lease_expires_at"]),
)


def render_status(status: Mapping[str, Any]) -> str:
    parts = rows_table(_PARTITIONS, status["partitions"])
    batches = rows_table(_BATCHES, status["batches"])
    flight = status["in_flight"]
    flight_line = (
        f"in flight: batch {flight['batch_id']} planned at {flight['planned_at']} ({flight['records_planned']} records)"
        if flight
        else "in flight: none"
    )
    attempts = rows_table(_ATTEMPTS, status["attempts"])
    counts = ", ".join(f"{n} {state}" for state, n in status["attempt_counts"].items())
    sink = status["sink"]
    sink_line = f"output: {sink['format']}{' table ' + sink['table'] if sink['table'] else ''} at {sink['location']}"
    if sink.get("commits") == "table by table":
        sink_line += " (tables committed one after another: a reader may see a batch in some tables first)"
    elif sink.get("commits") == "together":
        sink_line += " (tables committed together in one catalog transaction, just before the ledger's)"
    return (
        f"pipeline {status['pipeline']} ({', '.join(status['topics'])}), lag {status['lag_records_total']} records\n"
        f"{sink_line}\n{flight_line}\n\n{parts}\n\n{batches}{batch_tables_text(status['batches'])}\n\n"
        f"Spark attempts: {counts}\n{attempts}"
    )


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    status = pipeline_status(ctx, request.pipeline)
    return OperationResult(status, render_status(status))
