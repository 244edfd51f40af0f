"""One task for the whole batch: plan, read and commit, for frequent small batches.

The three-task group shows each step in Airflow's UI; every task of a real deployment also costs a
process start and a scheduling round. This operator runs the same three steps in one task with the
same ledger rows and the same guarantees: a retry replays the planned batch (the plan step
returns it), reuses a read that succeeded, and the commit's compare-and-set makes a second commit
a no-op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_kafka_offsets.core.defaults import DEFAULT_SPARK_CONN_ID
from airflow_kafka_offsets.operators.commit import KafkaBatchCommitOperator
from airflow_kafka_offsets.operators.plan import KafkaBatchPlanOperator
from airflow_kafka_offsets.operators.read import KafkaBatchSparkOperator


class KafkaBatchOperator(KafkaBatchPlanOperator, KafkaBatchSparkOperator, KafkaBatchCommitOperator):
    """Plan the next batch (or take the planned one), read it with Spark and commit it, in one task.

    Takes the plan operator's pipeline options (``topics``, ``output_root``, ``sink``, caps, ...), the
    read operator's Spark options (``spark_conn_id``, ``spark_conf``, ``spark_jars``, ...,
    ``min_partitions``) and, like the commit operator, emits one asset event per commit on the alias
    ``kafka_offsets/<pipeline>``. Returns ``{"pipeline", "batch_id", "records_planned", "replayed",
    "records", "committed_now", "output_uri"}``; ``batch_id`` is None when Kafka holds nothing new.
    """

    template_fields: Sequence[str] = tuple(
        name
        for name in dict.fromkeys((*KafkaBatchPlanOperator.template_fields, *KafkaBatchSparkOperator.template_fields))
        if name != "batch_id"  # the plan step decides it
    )
    ui_color = "#e8f4ea"

    def __init__(self, *, spark_conn_id: str = DEFAULT_SPARK_CONN_ID, **kwargs: Any) -> None:
        super().__init__(spark_conn_id=spark_conn_id, **kwargs)

    def run(self, context: Context) -> dict[str, Any]:
        planned = KafkaBatchPlanOperator.run(self, context)  # checks the Spark connection first
        batch_id = planned["batch_id"]
        if batch_id is None:
            return {**planned, "records": 0, "committed_now": False, "output_uri": None}
        self.read(context, batch_id)
        committed = self.commit(context, batch_id) or {}
        return {
            **planned,
            "records": committed.get("records", 0),
            "committed_now": committed.get("committed_now", False),
            "output_uri": committed.get("output_uri"),
        }
