"""Thin operators over :mod:`~airflow_kafka_offsets.service.plan`, :mod:`~airflow_kafka_offsets.service.read`
and :mod:`~airflow_kafka_offsets.service.commit`: plan, read and commit a batch.

Use them separately (the batch id travels by XCom) or through
:func:`kafka_ingest_task_group`. A retried or re-run task replays the planned
batch; a batch committed by another run is reported, not written again.

Each lives in a module of its own (``plan``, ``read``, ``commit``, ``task_group``; what they share
in ``base`` and ``assets``); this module keeps ``from airflow_kafka_offsets.operators.ingest import
...`` working.
"""

from __future__ import annotations

from airflow_kafka_offsets.core.plan_options import PlanOptions
from airflow_kafka_offsets.operators.assets import (
    NOT_IN_ASSET_GRAPH,
    KafkaBatchStepOperator,
    KafkaTopicAssetsOperator,
)
from airflow_kafka_offsets.operators.base import (
    KafkaOffsetsBaseOperator,
    SparkConnectorOperator,
    SparkJobOperator,
    parse_batch_id,
)
from airflow_kafka_offsets.operators.commit import KafkaBatchCommitOperator
from airflow_kafka_offsets.operators.plan import KafkaBatchPlanOperator, refuse_backfill
from airflow_kafka_offsets.operators.read import KafkaBatchSparkOperator
from airflow_kafka_offsets.operators.task_group import kafka_ingest_task_group
from airflow_kafka_offsets.runtime import actor_from_context

__all__ = [
    "NOT_IN_ASSET_GRAPH",
    "KafkaBatchCommitOperator",
    "KafkaBatchPlanOperator",
    "KafkaBatchSparkOperator",
    "KafkaBatchStepOperator",
    "KafkaOffsetsBaseOperator",
    "KafkaTopicAssetsOperator",
    "PlanOptions",
    "SparkConnectorOperator",
    "SparkJobOperator",
    "actor_from_context",
    "kafka_ingest_task_group",
    "parse_batch_id",
    "refuse_backfill",
]
