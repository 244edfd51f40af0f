"""Sweep: remove what dead attempts and aborted batches left on disk; never touch a live attempt.

Left behind by workers killed mid-batch (a dead attempt's staging), by a crash after a commit or
an abort but before its clean-up (staging of the batch's ended attempts), and by older versions
(the output directory of an aborted batch). Each batch is swept with its ledger row locked, so no
attempt of it starts or ends meanwhile; a dry run (the default) only lists what would go.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.sweep import OPERATION
from airflow_kafka_offsets.core.tables import render_table
from airflow_kafka_offsets.ledger import Attempt, Ledger
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations.result import OperationResult, dry_run_heading
from airflow_kafka_offsets.sinks import Sink

__all__ = ["OPERATION", "SweepItem", "SweepOutcome", "handle", "sweep"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepItem:
    """One directory the sweep removes: ``kind`` says why."""

    kind: str  # dead_attempt | ended_attempt | unknown_staging | aborted_output
    batch_id: int
    attempt_id: str | None
    path: str


@dataclass(frozen=True)
class SweepOutcome:
    pipeline: str
    dry_run: bool
    items: tuple[SweepItem, ...]
    marked_dead: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "dry_run": self.dry_run,
            "items": [asdict(i) for i in self.items],
            "marked_dead": list(self.marked_dead),
        }

    def table(self) -> str:
        return render_table(
            ["batch", "kind", "attempt", "path"],
            [[i.batch_id, i.kind, (i.attempt_id or "")[:12], i.path] for i in self.items],
        )


def _batch_items(
    sink: Sink,
    batch_id: int,
    state: BatchState,
    output_uri: str,
    attempts: list[Attempt],
    on_disk: list[str],
) -> list[SweepItem]:
    """What to remove of one batch, given its attempts (dead ones already shown as dead)."""
    items: list[SweepItem] = []
    settled = state is not BatchState.PLANNED  # committed or aborted: no commit will need its staging
    known = set()
    for attempt in attempts:
        known.add(attempt.staging_uri)
        if attempt.live or not sink.exists(attempt.staging_uri) or sink.in_use(attempt.staging_uri):
            continue
        if attempt.shown_state == "dead":
            items.append(SweepItem("dead_attempt", batch_id, attempt.attempt_id, attempt.staging_uri))
        elif settled:
            items.append(SweepItem("ended_attempt", batch_id, attempt.attempt_id, attempt.staging_uri))
    if settled and not any(a.live for a in attempts):
        items += [
            SweepItem("unknown_staging", batch_id, None, uri)
            for uri in on_disk
            if uri not in known and not sink.in_use(uri)
        ]
    leftover = sink.leftover_output(output_uri) if state is BatchState.ABORTED else None
    if leftover is not None:
        items.append(SweepItem("aborted_output", batch_id, None, leftover))
    return items


def sweep(
    ledger: Ledger,
    sink: Sink,
    pipeline: str,
    *,
    dry_run: bool = True,
    actor: Actor | None = None,
) -> SweepOutcome:
    """List (dry run) or remove the staging of dead attempts, of ended attempts of committed or
    aborted batches, and the output of aborted batches; running attempts whose lease ran out are
    marked dead. Live attempts and planned batches' succeeded or failed attempts are kept."""
    staged = sink.staged_attempts(pipeline)
    with ledger.transaction() as tx:
        tx.pipeline_spec(pipeline)  # an unknown pipeline is an error, not an empty sweep
        in_ledger = tx.batches_to_sweep(pipeline)
    batch_ids = sorted(set(staged) | in_ledger)
    items: list[SweepItem] = []
    marked: list[str] = []
    for batch_id in batch_ids:
        with ledger.transaction() as tx:
            record = tx.batch(pipeline, batch_id, for_update=True)  # no attempt of it starts or ends meanwhile
            if not dry_run:
                marked += tx.mark_dead_attempts(pipeline, batch_id)
            found = _batch_items(
                sink,
                batch_id,
                record.state,
                record.plan.output_uri,
                tx.attempts(pipeline, [batch_id]),
                staged.get(batch_id, []),
            )
            if not dry_run and found:
                for item in found:
                    if item.kind == "aborted_output":
                        sink.remove_output(item.path)
                    else:
                        sink.discard_attempt(item.path)
                tx.audit(pipeline, batch_id, "swept", {"items": [asdict(i) for i in found]}, actor or Actor())
        items += found
    outcome = SweepOutcome(pipeline, dry_run, tuple(items), tuple(marked))
    log.info(
        "pipeline %s: sweep %s %s item(s)%s\n%s",
        pipeline,
        "would remove" if dry_run else "removed",
        len(items),
        "" if dry_run else f", {len(marked)} attempt(s) marked dead",
        outcome.table(),
    )
    return outcome


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    dry_run = bool(request.get("dry_run"))
    sink = ctx.sinks.for_pipeline(ctx.ledger, request.pipeline)
    outcome = sweep(ctx.ledger, sink, request.pipeline, dry_run=dry_run, actor=ctx.actor)
    head = dry_run_heading("removed") if dry_run else f"removed {len(outcome.items)} location(s)"
    return OperationResult(outcome.to_json(), f"sweep {request.pipeline}: {head}\n{outcome.table()}")
