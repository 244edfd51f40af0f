"""The ledger on a PostgreSQL connection.

A connection of host, port, login, password, database and libpq parameters is opened with psycopg2
directly, with the arguments the postgres provider's hook would give it: that hook's module loads
psycopg 3, SQLAlchemy's URL and common-sql, about 100 ms of every plan and commit task. A
connection that needs the hook's own features (IAM or Azure tokens, Redshift, a cursor class,
SQLAlchemy options) is opened by the hook, and so is the Iceberg catalog's URL, when a sink asks for it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_offsets.core.defaults import DEFAULT_LEDGER_SCHEMA, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.hooks.connections import get_connection
from airflow_kafka_offsets.ledger import Ledger

_VERSION_CHECKED: set[tuple[str, str]] = set()
# Extras the postgres provider's hook acts on itself rather than passing them to the driver.
HOOK_EXTRAS = frozenset(
    {
        "iam",
        "redshift",
        "redshift-serverless",
        "cursor",
        "cluster-identifier",
        "workgroup-name",
        "aws_conn_id",
        "sqlalchemy_scheme",
        "sqlalchemy_query",
        "azure_conn_id",
    }
)


def driver_arguments(connection: Any) -> dict[str, Any] | None:
    """psycopg2's arguments for the Airflow connection, as the postgres hook builds them; None when the
    connection needs the hook itself."""
    extras = dict(connection.extra_dejson)
    if HOOK_EXTRAS & extras.keys():
        return None
    fields = {
        "host": connection.host,
        "user": connection.login,
        "password": connection.password,
        "dbname": connection.schema,
        "port": connection.port,
    }
    return {**fields, **extras}


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
        arguments = driver_arguments(get_connection(self.postgres_conn_id, "PostgreSQL"))
        connect: Callable[[], Any]
        if arguments is None:
            connect = self._postgres_hook().get_conn
        else:
            import psycopg2

            connect = partial(psycopg2.connect, **arguments)
        ledger = Ledger(connect, schema=self.schema, catalog_uri=lambda: catalog_uri(self._postgres_hook().get_uri()))
        if not migrate:
            return ledger
        checked = (self.postgres_conn_id, self.schema)
        if checked not in _VERSION_CHECKED:  # once per process: a task makes several ledgers
            ledger.check_version()
            _VERSION_CHECKED.add(checked)
        return ledger

    def _postgres_hook(self) -> Any:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        return PostgresHook(postgres_conn_id=self.postgres_conn_id)
