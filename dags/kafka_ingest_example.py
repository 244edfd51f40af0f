"""Scheduled exactly-once ingest of a Kafka topic into Parquet, every five minutes by default.

Connections: ``kafka_default`` (extra: {"bootstrap.servers": ...}),
``postgres_default`` (the ledger database) and ``spark_default`` (the Spark
master). Variables (with defaults): ``kafka_offsets_demo_topic``,
``kafka_offsets_demo_pipeline``, ``kafka_offsets_demo_output``,
``kafka_offsets_demo_max_records``, and for a table instead of Parquet directories
``kafka_offsets_demo_sink_format`` (``iceberg`` or ``delta``) with ``kafka_offsets_demo_table``.
``kafka_offsets_demo_interval_seconds`` (default 300) sets the schedule. The schedule and the
topic are read when Airflow parses this file (a change applies from the next parse), so the topic
is in Airflow's asset graph as ``kafka://<bootstrap server>/<topic>``, the plan task's inlet,
before any run.

Each commit emits one asset event through the alias ``kafka_offsets/<pipeline>``;
``kafka_batch_consumer_example`` is scheduled on it for the default pipeline ``demo_events``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Variable

from airflow_kafka_offsets.airflow_features import allowed_run_types
from airflow_kafka_offsets.operators import kafka_ingest_task_group

with DAG(
    dag_id="kafka_ingest_example",
    description="Kafka topic -> Parquet, exactly once, offsets in the PostgreSQL ledger",
    schedule=timedelta(seconds=int(Variable.get("kafka_offsets_demo_interval_seconds", default=300))),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    # The cursor, not a run's data interval, decides what a batch reads: backfills are refused
    # (Airflow's Backfill button and `airflow backfill create` say so); replay re-reads the past.
    **allowed_run_types("scheduled", "manual"),
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    tags=["kafka", "spark", "exactly-once"],
    doc_md=__doc__,
):
    kafka_ingest_task_group(
        "ingest",
        pipeline="{{ var.value.get('kafka_offsets_demo_pipeline', 'demo_events') }}",
        topics=Variable.get("kafka_offsets_demo_topic", default="demo-events"),
        output_root="{{ var.value.get('kafka_offsets_demo_output', '/tmp/kafka-offsets-demo') }}",
        sink={
            "format": "{{ var.value.get('kafka_offsets_demo_sink_format', 'directory') }}",
            "table": "{{ var.value.get('kafka_offsets_demo_table', '') }}",
        },
        plan_kwargs={"max_records_per_batch": "{{ var.value.get('kafka_offsets_demo_max_records', '') }}"},
    )
