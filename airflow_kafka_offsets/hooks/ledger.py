"""The ledger on a PostgreSQL connection (the postgres provider's hook hands out the connections)."""

from __future__ import annotations

from airflow.sdk import BaseHook

from airflow_kafka_offsets.core.defaults import DEFAULT_LEDGER_SCHEMA, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.hooks.connections import get_connection
from airflow_kafka_offsets.ledger import Ledger

_VERSION_CHECKED: set[tuple[str, str]] = set()


def catalog_uri(postgres_uri: str) -> str:
    """The ledger database as SQLAlchemy names it for psycopg2 (the Iceberg catalog's connection)."""
    scheme, rest = postgres_uri.split("://", 1)
    return f"postgresql+psycopg2://{rest}" if scheme in ("postgres", "postgresql") else postgres_uri


class LedgerHook(BaseHook):
    """The ledger on the PostgreSQL connection, in ``schema``; migrates it on first use."""

    conn_name_attr = "postgres_conn_id"
    default_conn_name = DEFAULT_POSTGRES_CONN_ID
    hook_name = "Kafka Offsets ledger"

    def __init__(self, postgres_conn_id: str = default_conn_name, schema: str = DEFAULT_LEDGER_SCHEMA) -> None:
        super().__init__()
        self.postgres_conn_id = postgres_conn_id
        self.schema = schema

    def get_conn(self, migrate: bool = True) -> Ledger:
        """``migrate=False``: the ledger as it is, for code that only reads (it may not exist yet)."""
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        get_connection(self.postgres_conn_id, "PostgreSQL")
        hook = PostgresHook(postgres_conn_id=self.postgres_conn_id)
        ledger = Ledger(hook.get_conn, schema=self.schema, catalog_uri=catalog_uri(hook.get_uri()))
        if not migrate:
            return ledger
        checked = (self.postgres_conn_id, self.schema)
        if checked not in _VERSION_CHECKED:  # once per process: a task makes several ledgers
            ledger.check_version()
            _VERSION_CHECKED.add(checked)
        return ledger
