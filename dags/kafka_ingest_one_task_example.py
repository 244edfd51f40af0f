"""The same exactly-once ingest as ``kafka_ingest_example``, each batch in one task.

``KafkaBatchOperator`` plans, reads and commits in one task: one process start and one scheduling
round per batch instead of three, for frequent small batches (the task group shows each step in
the UI instead). A retry replays the planned batch, like the task group's retries.

Connections: ``kafka_default``, ``postgres_default``, ``spark_default`` (a ``spark`` connection for
spark-submit, or a ``spark_connect`` one for a warm Spark Connect server). Variables (with
defaults): ``kafka_offsets_one_task_topic``, ``kafka_offsets_one_task_pipeline``,
``kafka_offsets_one_task_output``; ``kafka_offsets_one_task_interval_seconds`` schedules it (unset:
runs only when triggered).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Variable

from airflow_kafka_offsets.airflow_features import allowed_run_types
from airflow_kafka_offsets.operators import KafkaBatchOperator

INTERVAL = Variable.get("kafka_offsets_one_task_interval_seconds", default="")

with DAG(
    dag_id="kafka_ingest_one_task_example",
    description="Kafka topic -> Parquet, exactly once, plan + read + commit in one task",
    schedule=timedelta(seconds=int(INTERVAL)) if INTERVAL else None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    **allowed_run_types("scheduled", "manual"),
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    tags=["kafka", "spark", "exactly-once"],
    doc_md=__doc__,
):
    KafkaBatchOperator(
        task_id="batch",
        pipeline="{{ var.value.get('kafka_offsets_one_task_pipeline', 'demo_events_one_task') }}",
        topics=Variable.get("kafka_offsets_one_task_topic", default="demo-events"),
        output_root="{{ var.value.get('kafka_offsets_one_task_output', '/tmp/kafka-offsets-one-task') }}",
    )
