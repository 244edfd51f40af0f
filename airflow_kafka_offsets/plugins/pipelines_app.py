"""The "Kafka pipelines" page as a FastAPI app that Airflow's api-server mounts (see ``plugins``).

Every route requires what Airflow's own API requires to read DAG runs: a valid Airflow token (the
UI's ``_token`` cookie or an ``Authorization: Bearer`` header), checked by the auth manager.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.config import config_value
from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.history import unknown_range
from airflow_kafka_offsets.errors import PipelineNotFoundError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.plugins.pipelines_page import not_found_page, overview_page, pipeline_page
from airflow_kafka_offsets.runtime import AirflowRuntime
from airflow_kafka_offsets.service.overview import overview, pipeline_detail

URL_PREFIX = "/kafka-pipelines"
MANUAL_OPS_DAG_ID = "kafka_offsets_manual_ops"
KAFKA_TIMEOUT_S = 5.0


def _requires_login() -> Any:
    """Airflow's own check for reading DAG runs, as a FastAPI dependency (a 401/403 without a valid token)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return Depends(requires_access_dag("GET", DagAccessEntity.RUN))


def _runtime() -> AirflowRuntime:
    """The page's connections: ``[kafka_offsets] ui_kafka_conn_id`` and ``ui_postgres_conn_id``."""
    return AirflowRuntime(
        kafka_conn_id=config_value("ui_kafka_conn_id", DEFAULT_KAFKA_CONN_ID),
        postgres_conn_id=config_value("ui_postgres_conn_id", DEFAULT_POSTGRES_CONN_ID),
    )


@functools.cache
def _ledger() -> Ledger:
    """One per api-server worker; it keeps one connection between requests. Only read: never migrated."""
    return _runtime().ledger(migrate=False)


def _kafka() -> KafkaOffsetsClient:
    return _runtime().kafka(timeout_s=KAFKA_TIMEOUT_S)


def _trigger_url() -> str:
    from airflow.configuration import conf

    base = urlsplit(conf.get("api", "base_url", fallback="") or "/").path.rstrip("/")
    return f"{base}/dags/{MANUAL_OPS_DAG_ID}"


def _overview_href(request: Request) -> str:
    return f"{request.scope.get('root_path', '')}/"


Page = Annotated[int, Query(ge=1, le=1_000_000)]


def create_app() -> FastAPI:
    app = FastAPI(title="Kafka pipelines", dependencies=[_requires_login()], docs_url=None, redoc_url=None)

    @app.exception_handler(PipelineNotFoundError)
    def not_found(request: Request, exc: PipelineNotFoundError) -> HTMLResponse:
        return HTMLResponse(not_found_page(str(exc), _overview_href(request)), status_code=404)

    @app.get("/", response_class=HTMLResponse)
    def pipelines(page: Page = 1) -> str:
        return overview_page(overview(_ledger(), _kafka(), page), "pipelines/", _trigger_url())

    @app.get("/pipelines/{pipeline}", response_class=HTMLResponse)
    def pipeline(pipeline: str, page: Page = 1, range: str | None = None) -> HTMLResponse:
        # An unknown range answers with the page (over the default range) and the ranges there are.
        problem = unknown_range(range)
        detail = pipeline_detail(_ledger(), _kafka(), pipeline, page, range)
        return HTMLResponse(pipeline_page(detail, "../", _trigger_url(), problem), status_code=400 if problem else 200)

    return app
