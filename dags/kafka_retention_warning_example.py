"""Ingests the ``lag_events`` pipeline (topic ``lag-events``) at once when Kafka's retention may
delete records it has not read within the next 30 minutes.

``KafkaRetentionRiskTrigger`` in Airflow's triggerer checks every minute, per partition, the time
until retention may delete the oldest unread record (from its timestamp and the topic's
``retention.ms``, and from the pace of the log start offset, which is what ``retention.bytes``
moves). Each warning is an event on the asset ``kafka-offsets://lag_events/retention-risk``
(``extra``: ``{"from_trigger": true, "payload": {"pipeline", "reason", "warn_within_s",
"partitions": [{"topic", "partition", "cursor", "log_start_offset", "deletable_in_s"}]}}``) that
starts one run, which ingests everything unread with the same task group as
``kafka_ingest_example``. The trigger never consumes or commits anything in Kafka and never writes
the ledger.

Connections: ``kafka_default``, ``postgres_default`` (the ledger) and ``spark_default``; the
variable ``kafka_offsets_lag_output`` sets the output root.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_kafka_offsets.airflow_features import allowed_run_types
from airflow_kafka_offsets.operators import kafka_ingest_task_group
from airflow_kafka_offsets.triggers import KafkaRetentionRiskTrigger, retention_risk_asset

PIPELINE = "lag_events"
TOPIC = "lag-events"

at_risk = retention_risk_asset(
    KafkaRetentionRiskTrigger(pipeline=PIPELINE, topics=[TOPIC], warn_within=timedelta(minutes=30), poll_interval=60)
)

with DAG(
    dag_id="kafka_retention_warning_example",
    description="Kafka topic -> Parquet at once when retention may delete unread records within 30 minutes",
    schedule=[at_risk],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    **allowed_run_types("asset_triggered", "manual"),  # the cursor decides what a run reads: no backfills
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    tags=["kafka", "spark", "exactly-once", "assets", "retention"],
    doc_md=__doc__,
):
    kafka_ingest_task_group(
        "ingest",
        pipeline=PIPELINE,
        topics=TOPIC,
        output_root="{{ var.value.get('kafka_offsets_lag_output', '/tmp/kafka-offsets-lag-demo') }}",
    )
