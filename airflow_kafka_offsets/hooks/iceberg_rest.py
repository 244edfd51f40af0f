"""An Iceberg REST catalog from an Airflow connection of the provider's type ``kafka_offsets_iceberg_rest``:
what an Iceberg sink's ``catalog_conn_id`` names when its tables live behind a REST catalog. Its form
and the rules it is read by: :mod:`airflow_kafka_offsets.clients.iceberg_rest`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

from airflow_kafka_offsets.clients.iceberg_rest import (
    CONN_TYPE,
    HOOK_NAME,
    check_conn_type,
    rest_catalog_config,
    secrets,
)
from airflow_kafka_offsets.core.catalogs import RestCatalogConfig
from airflow_kafka_offsets.hooks.connections import get_connection, mask_secrets

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog


class IcebergRestCatalogHook(BaseHook):
    """Where the catalog is and who to be, from the connection ``iceberg_rest_conn_id`` (its secrets stay
    in the returned :class:`RestCatalogConfig`, masked in task logs, never in a message or a repr)."""

    conn_name_attr = "iceberg_rest_conn_id"
    default_conn_name = "iceberg_rest_default"
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(self, iceberg_rest_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.iceberg_rest_conn_id = iceberg_rest_conn_id

    def __repr__(self) -> str:
        return f"IcebergRestCatalogHook(iceberg_rest_conn_id={self.iceberg_rest_conn_id!r})"

    def config(self) -> RestCatalogConfig:
        conn_id = self.iceberg_rest_conn_id
        conn = get_connection(conn_id, "Iceberg REST catalog")
        check_conn_type(conn_id, conn.conn_type)
        config = rest_catalog_config(conn_id, conn.host, conn.login, conn.password, conn.extra_dejson)
        mask_secrets(secrets(config))
        return config

    def get_conn(self) -> RestCatalog:
        """PyIceberg's ``RestCatalog`` for the connection (it fetches /v1/config and, with a client id and
        secret, a token)."""
        from airflow_kafka_offsets.sinks.iceberg import rest_catalog

        return rest_catalog(self.config())

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: list the catalog's namespaces with the connection's credentials."""
        try:
            namespaces = self.get_conn().list_namespaces()
        except Exception as exc:  # the catalog's answer (401, 403, 404 ...) or why nothing answered
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"the catalog answers; {len(namespaces)} namespace(s)"
