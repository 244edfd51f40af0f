"""One task for the whole batch: plan, read and commit, for frequent small batches.

The three-task group shows each step in Airflow's UI; every task of a real deployment also costs a
process start and a scheduling round. This operator runs the same three steps in one task with the
same ledger rows and the same guarantees: a retry replays the planned batch (the plan step
returns it), reuses a read that succeeded, and the commit's compare-and-set makes a second commit
a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_kafka_offsets.core.options import templated_names
from airflow_kafka_offsets.core.plan_options import PlanOptions
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator
from airflow_kafka_offsets.operators.commit import commit_step, declare_output_alias
from airflow_kafka_offsets.operators.options import takes_options
from airflow_kafka_offsets.operators.plan import SPEC_ARGUMENTS, plan_next
from airflow_kafka_offsets.operators.read import SparkBatchStepOperator, read_step
from airflow_kafka_offsets.spark.options import SPARK_TEMPLATE_FIELDS, ReadOptions


class KafkaBatchOperator(SparkBatchStepOperator):
    """Plan the next batch (or take the planned one), read it with Spark and commit it, in one task.

    Takes the plan operator's ``topics``, ``output_root``, ``sink`` and pipeline options
    (:class:`~airflow_kafka_offsets.core.plan_options.PlanOptions`), the read operator's Spark options
    (``spark_conn_id``, ``spark_conf``, ``spark_jars``, ..., ``min_partitions``) and, like the commit
    operator, emits one asset event per commit on the alias ``kafka_offsets/<pipeline>``. Returns
    ``{"pipeline", "batch_id", "records_planned", "replayed", "records", "committed_now", "output_uri"}``;
    ``batch_id`` is None when Kafka holds nothing new.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        *SPEC_ARGUMENTS,
        *templated_names(PlanOptions),
        *SPARK_TEMPLATE_FIELDS,
        *templated_names(ReadOptions),
    )
    ui_color = "#e8f4ea"

    @takes_options(PlanOptions, ReadOptions)
    def __init__(
        self,
        *,
        topics: Sequence[str] | str,
        output_root: str,
        sink: str | Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topics = topics
        self.output_root = output_root
        self.sink = sink
        self.declare_topic_inlets(topics)
        declare_output_alias(self)

    def run(self, context: Context) -> dict[str, Any]:
        planned = plan_next(self, context, self.topics, self.output_root, self.sink)  # checks Spark first
        batch_id = planned["batch_id"]
        if batch_id is None:
            return {**planned, "records": 0, "committed_now": False, "output_uri": None}
        read_step(self, context, batch_id)
        committed = commit_step(self, context, batch_id) or {}
        return {
            **planned,
            "records": committed.get("records", 0),
            "committed_now": committed.get("committed_now", False),
            "output_uri": committed.get("output_uri"),
        }
