"""Reading Airflow connections with errors that name the connection (and never quote its secrets)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_offsets.airflow_features import airflow_exception
from airflow_kafka_offsets.errors import ConfigurationError


def get_connection(conn_id: str, what: str, *, if_missing: str = "", if_unreadable: str = "") -> Any:
    """The Airflow connection, or a ConfigurationError naming it (missing, or its lookup failed);
    ``if_missing`` and ``if_unreadable`` end those two messages (what to do, what is refused)."""
    AirflowNotFoundException = airflow_exception("AirflowNotFoundException")
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException as exc:
        raise ConfigurationError(f"{what} connection {conn_id!r} is not defined in Airflow{if_missing}") from exc
    except Exception as exc:  # a broken secrets backend or metadata database (its text may quote the secret)
        raise ConfigurationError(
            f"{what} connection {conn_id!r} could not be read from Airflow ({type(exc).__name__}; see the cause)"
            f"{if_unreadable}"
        ) from exc


def mask_secrets(secrets: tuple[str, ...]) -> None:
    """Register a connection's secrets with Airflow's log masker (a no-op outside a task or a component)."""
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - older task SDKs
        return
    for secret in secrets:
        mask_secret(secret)
