"""Scheduled ingest of the ``deadline_events`` pipeline with a freshness deadline: every run must end
within 15 minutes of its logical date (when it was due), so records are at most the interval plus
15 minutes old.

Airflow's Deadline Alerts (``deadline=``) watch each run; one still unfinished at its deadline runs
the callback in the triggerer: here the package's own, which logs how far behind the pipeline is
(``pipeline deadline_events: freshness deadline missed: run ... had not ended by ...; lag 1200
records, oldest unread record 1310s old``) and keeps it as the callback's output. Pass
``callback=AsyncCallback(...)`` (your notifier) to ``freshness_deadline`` to page someone instead.

Variables: ``kafka_offsets_deadline_seconds`` (default 900; read when Airflow parses this file),
``kafka_offsets_deadline_output`` (default ``/tmp/kafka-offsets-deadline-demo``). Connections:
``kafka_default``, ``postgres_default`` (the ledger) and ``spark_default``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Variable

from airflow_kafka_offsets.airflow_features import allowed_run_types
from airflow_kafka_offsets.operators import kafka_ingest_task_group
from airflow_kafka_offsets.triggers import freshness_deadline

PIPELINE = "deadline_events"

with DAG(
    dag_id="kafka_ingest_deadline_example",
    description="Kafka topic -> Parquet every 5 minutes; each run must end within 15 minutes",
    schedule=timedelta(minutes=5),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    **allowed_run_types("scheduled", "manual"),  # the cursor decides what a run reads: no backfills
    deadline=freshness_deadline(
        PIPELINE, within=timedelta(seconds=int(Variable.get("kafka_offsets_deadline_seconds", default=900)))
    ),
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    tags=["kafka", "spark", "exactly-once", "deadline"],
    doc_md=__doc__,
):
    kafka_ingest_task_group(
        "ingest",
        pipeline=PIPELINE,
        topics="deadline-events",
        output_root="{{ var.value.get('kafka_offsets_deadline_output', '/tmp/kafka-offsets-deadline-demo') }}",
    )
