"""Ingests the ``lag_events`` pipeline (topic ``lag-events``) when its lag builds up, not on a clock.

The DAG is scheduled on an asset watched by ``KafkaLagTrigger`` in Airflow's triggerer: every 5
seconds it compares Kafka's end offsets with the pipeline's cursor in the ledger and fires once
100 records are unread or the oldest unread record is 10 minutes old. Each firing is an asset
event (``extra``: ``{"from_trigger": true, "payload": {"pipeline", "reason", "lag_records",
"oldest_unread_age_s", ...}}``) that starts one run, which ingests everything unread with the same
task group as ``kafka_ingest_example``. The trigger never consumes or commits anything in Kafka
and never writes the ledger.

Connections: ``kafka_default``, ``postgres_default`` (the ledger) and ``spark_default``; the
variable ``kafka_offsets_lag_output`` sets the output root.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_kafka_offsets.airflow_features import allowed_run_types
from airflow_kafka_offsets.operators import kafka_ingest_task_group
from airflow_kafka_offsets.triggers import KafkaLagTrigger, lag_asset

PIPELINE = "lag_events"
TOPIC = "lag-events"

lag = lag_asset(
    KafkaLagTrigger(
        pipeline=PIPELINE,
        topics=[TOPIC],
        max_lag_records=100,
        max_lag_age=timedelta(minutes=10),
        poll_interval=5,
    )
)

with DAG(
    dag_id="kafka_lag_ingest_example",
    description="Kafka topic -> Parquet when 100 records or 10 minutes of lag build up",
    schedule=[lag],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    # The cursor decides what a run reads: no backfills (see kafka_ingest_example)
    **allowed_run_types("asset_triggered", "manual"),
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    tags=["kafka", "spark", "exactly-once", "assets"],
    doc_md=__doc__,
):
    kafka_ingest_task_group(
        "ingest",
        pipeline=PIPELINE,
        topics=TOPIC,
        output_root="{{ var.value.get('kafka_offsets_lag_output', '/tmp/kafka-offsets-lag-demo') }}",
    )
