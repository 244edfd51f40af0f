"""``kafka_ingest_task_group``: plan >> read >> commit for one pipeline, and the keys of its
``plan_kwargs`` and ``spark_kwargs`` (read from the options' declarations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import TaskGroup

from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID, DEFAULT_SPARK_CONN_ID
from airflow_kafka_offsets.core.options import option_names
from airflow_kafka_offsets.core.plan_options import PlanOptions
from airflow_kafka_offsets.operators.commit import KafkaBatchCommitOperator
from airflow_kafka_offsets.operators.plan import KafkaBatchPlanOperator
from airflow_kafka_offsets.operators.read import KafkaBatchSparkOperator
from airflow_kafka_offsets.spark.options import CONNECTOR_PARAMS, ReadOptions, SparkJobOptions

# The keys ``plan_kwargs`` and ``spark_kwargs`` take: the declared options of the plan and read steps (the
# Spark connection is the group's own argument).
PLAN_KWARGS: tuple[str, ...] = option_names(PlanOptions)
SPARK_KWARGS: tuple[str, ...] = tuple(
    name for name in (*option_names(SparkJobOptions), *option_names(ReadOptions)) if name != "spark_conn_id"
)


def kafka_ingest_task_group(
    group_id: str,
    *,
    pipeline: str,
    topics: Sequence[str] | str,
    output_root: str,
    sink: str | Mapping[str, Any] | None = None,
    kafka_conn_id: str = DEFAULT_KAFKA_CONN_ID,
    postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
    spark_conn_id: str = DEFAULT_SPARK_CONN_ID,
    ledger_schema: str | None = None,
    kafka_asset_server: str | None = None,
    plan_kwargs: Mapping[str, Any] | None = None,
    spark_kwargs: Mapping[str, Any] | None = None,
    commit_kwargs: Mapping[str, Any] | None = None,
) -> TaskGroup:
    """plan >> read >> commit for one pipeline, the batch id passed by XCom.

    Literal ``topics`` are the plan task's inlets in Airflow's asset graph as soon as the DAG is
    parsed (``kafka://<server>/<topic>``, the server from the Kafka connection, or
    ``kafka_asset_server``); templated ones become the read and commit tasks' inlets when they run.
    ``plan_kwargs`` takes the pipeline options (:data:`PLAN_KWARGS`: the fields of
    :class:`~airflow_kafka_offsets.core.plan_options.PlanOptions`) and ``spark_kwargs`` the read step's
    Spark options (:data:`SPARK_KWARGS`); ``commit_kwargs`` any BaseOperator argument of the commit task.
    The plan task checks the read task's Spark connection and connector before it plans.
    """
    common: dict[str, Any] = {
        "pipeline": pipeline,
        "kafka_conn_id": kafka_conn_id,
        "postgres_conn_id": postgres_conn_id,
        "ledger_schema": ledger_schema,
        "kafka_asset_server": kafka_asset_server,
    }
    with TaskGroup(group_id=group_id) as group:
        spark: Mapping[str, Any] = spark_kwargs or {}
        plan = KafkaBatchPlanOperator(
            task_id="plan",
            topics=topics,
            output_root=output_root,
            sink=sink,
            spark_conn_id=spark_conn_id,
            **{name: value for name, value in spark.items() if name in CONNECTOR_PARAMS},
            **common,
            **(plan_kwargs or {}),
        )
        batch_id = plan.output  # the plan's result: read and commit take its batch_id
        read = KafkaBatchSparkOperator(
            task_id="read", batch_id=batch_id, spark_conn_id=spark_conn_id, **common, **spark
        )
        commit = KafkaBatchCommitOperator(task_id="commit", batch_id=batch_id, **common, **(commit_kwargs or {}))
        plan >> read >> commit
    return group
