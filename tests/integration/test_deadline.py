"""The freshness deadline of ``kafka_ingest_deadline_example`` on the real stack.

Under the real scheduler and triggerer: a run due 15.5 minutes ago gets its deadline (logical date
+ 15 minutes, as the DAG declares) in Airflow's metadata DB, the scheduler finds it missed, and the
package's callback runs in the triggerer, its report in the callback's output and the triggerer's
log. In-process against the real ledger and Kafka: the report names the run and the pipeline's lag
in records and in time.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg2
from confluent_kafka.admin import NewTopic

from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.triggers import freshness_missed
from devstack import airflow as airflow_deployment

from .helpers import produce
from .pipeline import operation_context
from .test_assets_lineage import airflow_variables, api
from .test_manual_ops_ui import wait_until

DAG_ID, PIPELINE, TOPIC = "kafka_ingest_deadline_example", "deadline_events", "deadline-events"


def test_a_run_past_its_freshness_deadline_runs_the_callback_in_the_triggerer(airflow_ui, stack, kafka_admin, tmp_path):
    kafka_admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].exception(30)  # exists already: fine
    produce(stack.bootstrap_servers, TOPIC, 5, partitions=1)
    due = datetime.now(UTC) - timedelta(minutes=15, seconds=30)  # a run due 15.5 minutes ago: already late
    triggerer_log = Path(airflow_ui["home"]) / "logs" / "triggerer.out"
    log_from = triggerer_log.stat().st_size
    with airflow_variables(airflow_ui, {"kafka_offsets_deadline_output": str(tmp_path / "out")}):
        try:
            api(airflow_ui, f"dags/{DAG_ID}", "PATCH", {"is_paused": False})
            run = api(airflow_ui, f"dags/{DAG_ID}/dagRuns", "POST", {"logical_date": due.isoformat()})
            with psycopg2.connect(stack.pg_dsn(airflow_deployment.database())) as conn, conn.cursor() as cur:

                def callback_done() -> list[tuple]:
                    cur.execute(
                        "SELECT d.deadline_time - r.logical_date, d.missed, c.state, c.output FROM deadline d"
                        " JOIN dag_run r ON r.id = d.dagrun_id JOIN callback c ON c.id = d.callback_id"
                        " WHERE r.dag_id = %s AND r.run_id = %s",
                        (DAG_ID, run["dag_run_id"]),
                    )
                    rows = cur.fetchall()
                    conn.commit()
                    return rows if rows and rows[0][2] in ("success", "failed") else []

                ((interval, missed, state, output),) = wait_until(callback_done, "the deadline's callback", 120)
        finally:
            api(airflow_ui, f"dags/{DAG_ID}", "PATCH", {"is_paused": True})
    assert (interval, missed, state) == (timedelta(minutes=15), True, "success")
    assert output.startswith(
        f"pipeline {PIPELINE}: freshness deadline missed: run {run['dag_run_id']} of {DAG_ID} had not ended by "
    )
    assert "; lag " in output and " records" in output
    with triggerer_log.open() as log:
        log.seek(log_from)
        assert f"pipeline {PIPELINE}: freshness deadline missed: run {run['dag_run_id']}" in log.read()


def test_the_deadline_callback_reports_the_run_and_the_pipelines_lag(stack, make_topic, schema):
    topic = make_topic(partitions=1)
    now_ms = int(time.time() * 1000)
    produce(stack.bootstrap_servers, topic, 7, partitions=1)
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema)
    ledger.migrate()
    with ledger.transaction() as tx:
        tx.lock_pipeline(build_spec("fresh", [topic], "/tmp/ako-deadline-test-output"))
    reset_offsets(operation_context(ledger, stack), "fresh", ResetRequest(ResetMode.TO_OFFSET, offset=2), dry_run=False)
    time.sleep(1.5)
    context = {
        "dag_run": {"dag_id": DAG_ID, "dag_run_id": "scheduled__2026-11-25T10:00:00+00:00"},
        "deadline": {"id": "d1", "deadline_time": "2026-11-25T10:15:00+00:00"},
    }
    message = asyncio.run(freshness_missed("fresh", ledger_schema=schema, context=context))
    head, age = message.rsplit(", oldest unread record ", 1)
    assert head == (
        f"pipeline fresh: freshness deadline missed: run scheduled__2026-11-25T10:00:00+00:00 of {DAG_ID} had not "
        "ended by 2026-11-25T10:15:00+00:00; lag 5 records"
    )
    seconds_old = int(age.removesuffix("s old"))
    assert 1 <= seconds_old <= time.time() - now_ms / 1000 + 1
