"""Changing a pipeline's spec on purpose: dry run first, refused where it would break the ledger, audited.

A plan never changes the stored spec (it refuses a different one). This operation does, with
these semantics:

- **adding a topic**: its partitions get cursors on the next plan, placed by the pipeline's
  ``new_partition_offsets`` policy (``starting_offsets`` if the pipeline never planned). A topic
  that was removed earlier and still has retired cursors resumes from them, so nothing read
  twice and nothing skipped silently (retention losses go through ``on_data_loss``).
- **removing a topic**: refused while a batch is planned. Its cursors are retired: they stay in
  the ledger at the last committed offset, no longer advanced, and the audit row lists them, so
  every offset read so far stays accounted for (I1) and a later re-add continues from them.
- **options** (caps, policies, consumer group, decoding): apply from the next batch; a
  decoding change waits for a planned batch (it is read with the decoding it was planned with).
- **output_root** never changes: batch locations stay a function of pipeline and batch number.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.model import PipelineSpec, StartPolicy, TopicPartition
from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.change_spec import OPERATION, spec_changes
from airflow_kafka_offsets.core.spec import updated_spec
from airflow_kafka_offsets.core.spec_diff import FieldChange, change_refusals, diff_specs
from airflow_kafka_offsets.core.tables import render_table
from airflow_kafka_offsets.errors import SpecChangeRefusedError
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations.result import OperationResult, change_heading

__all__ = ["OPERATION", "SpecChangeOutcome", "change_spec", "handle"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpecChangeOutcome:
    """What the change does (or did, when ``applied``): fields, new partitions' starts, retired cursors.

    ``starts`` gives each partition of an added topic its first offset as known now (a
    resumed cursor, or the policy's offset in Kafka today; the plan fixes it).
    """

    pipeline: str
    applied: bool
    changes: tuple[FieldChange, ...]
    starts: tuple[tuple[TopicPartition, int | None, str], ...]
    retired: tuple[tuple[TopicPartition, int], ...]
    table: str


def change_spec(
    ctx: OperationContext, pipeline: str, new_spec: PipelineSpec, dry_run: bool = True
) -> SpecChangeOutcome:
    """Compare ``new_spec`` with the stored one and, unless ``dry_run``, store it (audited).

    Raises :class:`SpecChangeRefusedError` (nothing changed) when the change is not allowed now.
    """
    if new_spec.name != pipeline:
        raise SpecChangeRefusedError(
            f"the new spec is for pipeline {new_spec.name!r}, not {pipeline!r}: a pipeline's name never changes"
        )
    with ctx.ledger.transaction() as tx:
        tx.lock_existing_pipeline(pipeline)
        stored = tx.pipeline_spec(pipeline)
        diff = diff_specs(stored, new_spec)
        refusals = change_refusals(diff, tx.planned_batch_id(pipeline), tx.committed_topics(pipeline))
        if refusals:
            raise SpecChangeRefusedError(
                f"pipeline {pipeline!r}: the spec change is refused, nothing was changed:\n"
                + "\n".join(f"  {r}" for r in refusals)
            )
        cursors = tx.cursors(pipeline)
        starts = _added_starts(ctx.kafka, stored, new_spec, diff.added_topics, cursors)
        retired = tuple(sorted((tp, off) for tp, off in cursors.items() if tp.topic in diff.removed_topics))
        table = _render(diff.lines(), starts, retired)
        if dry_run or not diff:
            log.info(
                "pipeline %s: spec change %s\n%s",
                pipeline,
                "dry run, nothing changed" if diff else "changes nothing",
                table,
            )
            return SpecChangeOutcome(pipeline, False, diff.changes, starts, retired, table)
        detail = {
            "before": stored.to_json(),
            "after": new_spec.to_json(),
            "changes": [{"field": c.field, "before": c.before, "after": c.after} for c in diff.changes],
            "added_topics": list(diff.added_topics),
            "removed_topics": list(diff.removed_topics),
            "retired_cursors": {str(tp): off for tp, off in retired},
        }
        if ctx.approval is not None:
            ctx.approval.check("change_spec", pipeline, table)
        tx.replace_spec(new_spec, detail, ctx.actor)
    log.info("pipeline %s: spec changed\n%s", pipeline, table)
    return SpecChangeOutcome(pipeline, True, diff.changes, starts, retired, table)


def _added_starts(
    kafka: KafkaOffsetsClient,
    stored: PipelineSpec,
    new_spec: PipelineSpec,
    added: tuple[str, ...],
    cursors: Mapping[TopicPartition, int],
) -> tuple[tuple[TopicPartition, int | None, str], ...]:
    """Where each partition of an added topic starts; the topics must exist in Kafka."""
    if not added:
        return ()
    offsets = kafka.offsets(added)  # UnknownTopicError names a topic that does not exist
    tracking = any(tp.topic in stored.topics for tp in cursors)
    policy = new_spec.new_partition_offsets if tracking else new_spec.starting_offsets
    starts: list[tuple[TopicPartition, int | None, str]] = []
    for tp in sorted(offsets):
        if tp in cursors:
            starts.append((tp, cursors[tp], "resumes its retired cursor"))
        elif policy is StartPolicy.ERROR:
            starts.append((tp, None, "refused by policy 'error' at the next plan: reset it to give it a cursor"))
        else:
            where = offsets[tp].earliest if policy is StartPolicy.EARLIEST else offsets[tp].latest
            starts.append((tp, where, f"{policy.value} (the next plan fixes it)"))
    return tuple(starts)


def _render(
    lines: tuple[str, ...],
    starts: tuple[tuple[TopicPartition, int | None, str], ...],
    retired: tuple[tuple[TopicPartition, int], ...],
) -> str:
    parts = ["\n".join(lines) if lines else "no differences"]
    if starts:
        parts.append(
            render_table(
                ["added partition", "starts at", "how"],
                [[str(tp), "-" if off is None else off, how] for tp, off, how in starts],
            )
        )
    if retired:
        parts.append(render_table(["retired partition", "cursor kept at"], [[str(tp), off] for tp, off in retired]))
    return "\n\n".join(parts)


def handle(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    dry_run = bool(request.get("dry_run"))
    with ctx.ledger.transaction() as tx:
        stored = tx.pipeline_spec(request.pipeline)
    new_spec = updated_spec(stored, spec_changes(request.values))
    outcome = change_spec(ctx, request.pipeline, new_spec, dry_run=dry_run)
    applied = "applied: update the DAG that plans this pipeline to match" if outcome.applied else None
    head = change_heading(applied, dry_run and bool(outcome.changes))
    data = {
        "applied": outcome.applied,
        "dry_run": dry_run,
        "changes": [{"field": c.field, "before": c.before, "after": c.after} for c in outcome.changes],
        "spec": new_spec.to_json(),
        "added_partitions": [
            {"topic": tp.topic, "partition": tp.partition, "starts_at": at, "how": how}
            for tp, at, how in outcome.starts
        ],
        "retired_cursors": [{"topic": tp.topic, "partition": tp.partition, "cursor": at} for tp, at in outcome.retired],
    }
    return OperationResult(data, f"change-spec {request.pipeline}: {head}\n{outcome.table}")
