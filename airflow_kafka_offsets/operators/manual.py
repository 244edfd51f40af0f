"""One operator for the manual operations (status, replay, reset, catch-up, abort), driven by the
trigger form of ``dags/kafka_offsets_manual_ops.py`` or by any DAG that passes the same options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.hooks import KafkaClusterHook
from airflow_kafka_offsets.service.operations import (
    ReplaySelection,
    abort_planned_batch,
    catch_up,
    mirror_to_consumer_group,
    parse_offset_ranges,
    pipeline_status,
    render_status,
    replay_batch,
    reset_offsets,
    resolve_replay,
)
from airflow_kafka_offsets.operators.ingest import KafkaBatchSparkOperator, actor_from_context
from airflow_kafka_offsets.core.spec import validate_pipeline_name
from airflow_kafka_offsets.core.resets import build_reset_request, parse_datetime
from airflow_kafka_offsets.clients.spark_submit import SparkBatchSubmitter

OPERATIONS = ("status", "replay", "reset", "catch_up", "abort")


def _int_or_none(options: Mapping[str, Any], key: str) -> int | None:
    value = options.get(key)
    if value in (None, "", "None"):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidPipelineSpecError(f"{key} must be a whole number, got {value!r}") from None


def replay_selection(options: Mapping[str, Any]) -> ReplaySelection:
    since = options.get("replay_since") or None
    until = options.get("replay_until") or None
    return ReplaySelection(
        first_batch=_int_or_none(options, "replay_first_batch"),
        last_batch=_int_or_none(options, "replay_last_batch"),
        offset_ranges=parse_offset_ranges(options.get("replay_offset_ranges")),
        since=parse_datetime(since) if since else None,
        until=parse_datetime(until) if until else None,
    )


class KafkaPipelineOperationOperator(KafkaBatchSparkOperator):
    """Run one manual operation on a pipeline; ``options`` carries the trigger form's fields.

    Reuses the Spark settings of :class:`KafkaBatchSparkOperator` for replay and catch-up.
    """

    template_fields: Sequence[str] = (*KafkaBatchSparkOperator.template_fields, "operation", "options")
    ui_color = "#f3e8fd"

    def __init__(self, *, operation: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.operation = operation
        self.options = options

    def execute(self, context: Any) -> dict[str, Any]:
        operation = str(self.operation)
        if operation not in OPERATIONS:
            raise InvalidPipelineSpecError(f"operation must be one of {', '.join(OPERATIONS)}; got {operation!r}")
        validate_pipeline_name(self.pipeline)
        options = dict(self.options or {})
        ledger = self.ledger()
        kafka_hook = KafkaClusterHook(self.kafka_conn_id)
        kafka = kafka_hook.get_conn()
        actor = {**actor_from_context(context), "operation": operation}

        if operation == "status":
            status = pipeline_status(ledger, kafka, self.pipeline)
            self.log.info("status of %s\n%s", self.pipeline, render_status(status))
            return status
        if operation == "reset":
            request = build_reset_request(
                str(options.get("reset_mode", "")), options.get("reset_value"),
                options.get("reset_topic"), options.get("reset_partitions"),
            )
            dry_run = options.get("dry_run", True) not in (False, "false", "False", 0)
            outcome = reset_offsets(ledger, kafka, self.pipeline, request, actor, dry_run=dry_run)
            self.log.info("reset of %s (%s):\n%s", self.pipeline,
                          "applied as batch %s" % outcome.batch_id if outcome.applied else "dry run: nothing changed",
                          outcome.table)
            if outcome.applied:
                mirror_to_consumer_group(ledger, kafka, self.pipeline)
            return {"applied": outcome.applied, "batch_id": outcome.batch_id, "changes": list(outcome.changes)}
        if operation == "abort":
            reason = str(options.get("abort_reason") or "aborted by hand")
            batch_id = abort_planned_batch(ledger, self.pipeline, reason, actor)
            self.log.info("aborted batch %s of %s: %s", batch_id, self.pipeline, reason)
            return {"aborted": batch_id}

        submit = SparkBatchSubmitter(self.settings())
        properties = kafka_hook.spark_properties()
        if operation == "replay":
            batch_ids = resolve_replay(ledger, kafka, self.pipeline, replay_selection(options))
            target = str(options.get("replay_output_root") or "").strip() or None
            self.log.info("replaying %s batch(es) of %s: %s", len(batch_ids), self.pipeline, batch_ids)
            outputs = [replay_batch(ledger, self.pipeline, b, submit, properties, actor, target) for b in batch_ids]
            return {"replayed": batch_ids, "outputs": outputs}
        max_batches = _int_or_none(options, "catch_up_max_batches") or 10
        outcome = catch_up(ledger, self.pipeline, kafka.offsets, submit, properties, actor, max_batches,
                           after_commit=lambda: mirror_to_consumer_group(ledger, kafka, self.pipeline))
        return {"batches": outcome.batches, "records": outcome.records, "lag_left": outcome.lag_left}
