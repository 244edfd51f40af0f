"""The commit step: the batch's staged output published and the cursor advanced in one ledger
transaction; each commit an asset event on the pipeline's output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context, XComArg

from airflow_kafka_offsets.airflow_features import available
from airflow_kafka_offsets.core.spec import validate_pipeline_name
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.lineage import (
    batch_partition_key,
    output_asset,
    pipeline_batches_asset,
    pipeline_output_alias,
)
from airflow_kafka_offsets.operators.assets import KafkaBatchStepOperator
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator, parse_batch_id
from airflow_kafka_offsets.runtime import actor_from_context
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.consumer_group import mirror_to_consumer_group


class KafkaBatchCommitOperator(KafkaBatchStepOperator):
    """Publish the batch's staged output and advance the cursor in one ledger transaction.

    Its outlet is the alias ``kafka_offsets/<pipeline>`` (:func:`pipeline_output_alias`); each
    commit this run makes emits one asset event on the output (the sink's location) through it,
    with the batch in ``extra``. Each commit also emits an event on the partitioned asset
    ``kafka-offsets://<pipeline>/batches`` (:func:`pipeline_batches_asset`) whose partition key names
    the batch (``batch=000000000042``), so a downstream DAG scheduled with
    ``PartitionedAssetTimetable`` runs once per batch, with that key (on an Airflow without
    partitioned asset events, before 3.3, the event has no partition key). A run that finds the batch
    already committed, or nothing to commit, emits neither (the partitioned asset becomes an outlet
    only when a commit happens).

    :param batch_id: the batch to commit (the plan task's ``output``, an int, or a template);
        default: the pipeline's planned batch.
    """

    template_fields: Sequence[str] = (*KafkaOffsetsBaseOperator.template_fields, "batch_id")
    ui_color = "#e0ecfd"

    def __init__(self, *, batch_id: int | str | Mapping[str, Any] | XComArg | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch_id = batch_id
        declare_output_alias(self)

    def run(self, context: Context) -> dict[str, Any] | None:
        return commit_step(self, context, parse_batch_id(self.batch_id))


def declare_output_alias(op: KafkaBatchStepOperator) -> None:
    """At parse time: the pipeline's output alias as the task's outlet (a templated pipeline's alias
    is added once rendered)."""
    if "{{" not in op.pipeline:
        op.add_outlets([pipeline_output_alias(op.pipeline)])


def commit_step(op: KafkaBatchStepOperator, context: Context, batch_id: int | None) -> dict[str, Any] | None:
    """Commit ``batch_id`` (None: the planned batch) of ``op``'s pipeline; None when there is nothing to commit."""
    validate_pipeline_name(op.pipeline)
    alias = pipeline_output_alias(op.pipeline)
    if alias not in op.outlets:
        op.add_outlets([alias])
    ledger = op.ledger()
    if batch_id is None:
        with ledger.transaction() as tx:
            batch_id = tx.planned_batch_id(op.pipeline)
        if batch_id is None:
            op.log.info("pipeline %s: no batch to commit", op.pipeline)
            return None
    sink = op.sink_for(ledger)
    lineage = op.pipeline_lineage(ledger, sink)
    outcome = commit_batch(ledger, sink, op.pipeline, batch_id, actor_from_context(context))
    if outcome.committed_now:
        committed = op.handled(lineage, outcome.plan, outcome.records)
        facts = committed.batch_facts() | ({"output_tables": dict(outcome.tables)} if outcome.tables else {})
        context["outlet_events"][alias].add(output_asset(committed.location), extra=facts)
        batches = pipeline_batches_asset(op.pipeline)
        if batches not in op.outlets:
            op.add_outlets([batches])
        event = context["outlet_events"][batches]
        event.extra = facts
        if available("partitioned_assets"):
            event.add_partitions(batch_partition_key(batch_id))
        mirror_consumer_group(op, ledger)
    return {
        "pipeline": op.pipeline,
        "batch_id": batch_id,
        "records": outcome.records,
        "committed_now": outcome.committed_now,
        "output_uri": outcome.plan.output_uri,
    }


def mirror_consumer_group(op: KafkaBatchStepOperator, ledger: Ledger) -> None:
    """Best effort: the ledger is the truth, the consumer group only feeds lag monitors."""
    try:
        group = mirror_to_consumer_group(ledger, op.runtime().kafka(), op.pipeline)
    except Exception as exc:
        op.log.warning("pipeline %s: could not mirror offsets into its consumer group: %s", op.pipeline, exc)
    else:
        if group:
            op.log.info("pipeline %s: offsets mirrored into consumer group %s", op.pipeline, group)
