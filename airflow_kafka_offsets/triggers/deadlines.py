"""A freshness deadline for an ingest DAG with Airflow's Deadline Alerts (Airflow 3.1 and later; a
``VariableInterval`` and the deadline's name need Airflow 3.3).

A run of the ingest DAG reads everything Kafka holds when it plans, so records are at most one
schedule interval plus one run old once it commits: a run still unfinished ``within`` after its
logical date (when it was due; a schedule's runs in Airflow 3 are dated when they are due) is data
going stale. Airflow's scheduler watches the deadline; when a run misses it, the
callback runs in the triggerer. The package's callback says how far behind the pipeline is (lag in
records and the age of the oldest unread record, looked up as ``status`` does) in the triggerer's
log and the callback's output; give your own (a Slack or PagerDuty notifier) instead as ``callback``.
"""

from __future__ import annotations

import inspect
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg2
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

from airflow_kafka_offsets.airflow_features import require
from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.lag import total_lag, unread_positions
from airflow_kafka_offsets.core.spec import validate_pipeline_name
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.runtime import AirflowRuntime
from airflow_kafka_offsets.triggers.watch import KAFKA_TIMEOUT_S, in_thread

if TYPE_CHECKING:
    from airflow.sdk.definitions.callback import Callback
    from airflow.sdk.definitions.deadline import VariableInterval

log = logging.getLogger(__name__)


def async_callback(target: Any, kwargs: dict[str, Any]) -> Callback:
    """A callback run in the triggerer (Airflow's AsyncCallback: in ``airflow.sdk.definitions.callback`` from
    3.2 on, beside the deadline in 3.1), for ``freshness_deadline(..., callback=...)`` on every line."""
    try:
        from airflow.sdk.definitions.callback import AsyncCallback
    except ImportError:
        from airflow.sdk.definitions.deadline import AsyncCallback  # type: ignore[attr-defined,no-redef,unused-ignore]
    return AsyncCallback(target, kwargs=kwargs)  # type: ignore[no-any-return,unused-ignore]


def freshness_deadline(
    pipeline: str,
    within: timedelta | VariableInterval,
    *,
    callback: Callback | None = None,
    kafka_config_id: str = DEFAULT_KAFKA_CONN_ID,
    postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
    ledger_schema: str | None = None,
) -> DeadlineAlert:
    """The ``deadline=`` of an ingest DAG: each run must end within ``within`` of its logical date,
    else ``callback`` runs (default: :func:`freshness_missed`, which reports the pipeline's lag). A run
    without a logical date (triggered with none) has no deadline. ``within`` as a ``VariableInterval``
    needs Airflow 3.3 (:class:`~airflow_kafka_offsets.errors.AirflowFeatureUnavailableError` before);
    where Airflow names deadlines (3.3), it is ``kafka_offsets_freshness_<pipeline>``."""
    validate_pipeline_name(pipeline)
    if not isinstance(within, timedelta):
        require("deadline_variable_interval")
    report = async_callback(
        freshness_missed,
        {
            "pipeline": pipeline,
            "kafka_config_id": kafka_config_id,
            "postgres_conn_id": postgres_conn_id,
            "ledger_schema": ledger_schema,
        },
    )
    takes_name = "name" in inspect.signature(DeadlineAlert).parameters
    named = {"name": f"kafka_offsets_freshness_{pipeline}"} if takes_name else {}
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=within,  # type: ignore[arg-type,unused-ignore]
        callback=callback or report,
        **named,
    )


def pipeline_lag(runtime: AirflowRuntime, pipeline: str) -> str:
    """The pipeline's lag in records and the age of its oldest unread record, in words."""
    ledger = runtime.ledger(migrate=False)
    try:
        with ledger.transaction(read_only=True) as tx:
            topics = tx.pipeline_spec(pipeline).topics
            cursors = tx.cursors(pipeline)
    finally:
        ledger.close()
    kafka = runtime.kafka(timeout_s=KAFKA_TIMEOUT_S)
    offsets = kafka.offsets(list(topics))
    seen = [ts for ts in kafka.timestamps_at(unread_positions(cursors, offsets)).values() if ts is not None]
    age = f", oldest unread record {(datetime.now(UTC) - min(seen)).total_seconds():.0f}s old" if seen else ""
    return f"lag {total_lag(cursors, offsets)} records{age}"


async def freshness_missed(
    pipeline: str,
    kafka_config_id: str = DEFAULT_KAFKA_CONN_ID,
    postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
    ledger_schema: str | None = None,
    context: dict[str, Any] | None = None,
) -> str:
    """The default callback: a warning naming the run that missed the deadline and the pipeline's lag."""
    run = (context or {}).get("dag_run") or {}
    deadline = (context or {}).get("deadline") or {}
    runtime = AirflowRuntime(kafka_config_id, postgres_conn_id, ledger_schema)
    try:
        lag = await in_thread(pipeline_lag, runtime, pipeline)
    except (KafkaOffsetsError, psycopg2.Error) as exc:
        lag = f"lag unknown ({exc})"
    message = (
        f"pipeline {pipeline}: freshness deadline missed: run {run.get('dag_run_id')} of {run.get('dag_id')} "
        f"had not ended by {deadline.get('deadline_time')}; {lag}"
    )
    log.warning("%s", message)
    return message
