"""The ledger on a PostgreSQL connection.

A connection of host, port, login, password, database and libpq parameters is opened with psycopg2
directly, with the arguments the postgres provider's hook would give it: that hook's module loads
psycopg 3, SQLAlchemy's URL and common-sql, about 100 ms of every plan and commit task. A
connection that needs the hook's own features (IAM or Azure tokens, Redshift, a cursor class,
SQLAlchemy options) is opened by the hook, and so is the Iceberg catalog's URL, when a sink asks for it.

Either way the connection gets the ledger's deadlines (:class:`~airflow_kafka_offsets.core.timeouts.LedgerTimeouts`:
connect timeout, keepalives, TCP user timeout; the session deadlines are SET by the ledger), with the
extra's values for any of their keys.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from airflow.sdk import BaseHook

from airflow_kafka_offsets.core.defaults import DEFAULT_LEDGER_SCHEMA, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.timeouts import KEYS, LedgerTimeouts
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


def driver_extras(extras: dict[str, Any]) -> dict[str, Any]:
    """The extra as the driver gets it: the deadline keys replaced by their values (the extra's, or the
    defaults); the session deadlines are not libpq keywords, the ledger SETs them."""
    others = {k: v for k, v in extras.items() if k not in KEYS}
    return {**others, **LedgerTimeouts.from_extra(extras).libpq_parameters()}


def driver_arguments(connection: Any) -> dict[str, Any] | None:
    """psycopg2's arguments for the Airflow connection, as the postgres hook builds them, with the ledger's
    deadlines; None when the connection needs the hook itself."""
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
    return {**fields, **driver_extras(extras)}


def ledger_address(connection: Any) -> str:
    """``host:port`` as the connection configures them (libpq's default port when it gives none), for errors."""
    return f"{connection.host or 'the default socket'}:{connection.port or 5432}"


def catalog_uri(postgres_uri: str, timeouts: LedgerTimeouts) -> str:
    """The ledger database as SQLAlchemy names it (psycopg2 unless the URL names a driver), for the Iceberg
    catalog's engine, with the deadlines: libpq's in the query unless the URL has them, the session's in
    ``options`` (before the URL's own options, which therefore win)."""
    scheme, rest = postgres_uri.split("://", 1)
    scheme = "postgresql+psycopg2" if scheme in ("postgres", "postgresql") else scheme
    if not scheme.startswith("postgresql+"):
        return postgres_uri
    parts = urlsplit(f"{scheme}://{rest}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = {key for key, _ in query}
    theirs = [value for key, value in query if key == "options"]
    query = [(key, value) for key, value in query if key != "options"]
    query += [(key, str(value)) for key, value in timeouts.libpq_parameters().items() if key not in given]
    query.append(("options", " ".join([timeouts.session_options(), *theirs])))
    return urlunsplit(parts._replace(query=urlencode(query)))


def postgres_hook(conn_id: str, connection: Any) -> Any:
    """The provider's hook on a copy of ``connection`` whose extra carries the deadlines."""
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    with_deadlines = copy.copy(connection)
    with_deadlines.extra = json.dumps(driver_extras(dict(connection.extra_dejson)))
    return PostgresHook(postgres_conn_id=conn_id, connection=with_deadlines)


def deadline_catalog_uri(conn_id: str, connection: Any) -> str:
    """The SQLAlchemy URL of a PostgreSQL connection's database (an Iceberg SQL catalog), with the deadlines."""
    return catalog_uri(postgres_hook(conn_id, connection).get_uri(), LedgerTimeouts.from_extra(connection.extra_dejson))


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
        connection = get_connection(self.postgres_conn_id, "PostgreSQL")
        arguments = driver_arguments(connection)
        connect: Callable[[], Any]
        if arguments is None:
            connect = postgres_hook(self.postgres_conn_id, connection).get_conn
        else:
            import psycopg2

            connect = partial(psycopg2.connect, **arguments)
        ledger = Ledger(
            connect,
            schema=self.schema,
            catalog_uri=partial(deadline_catalog_uri, self.postgres_conn_id, connection),
            timeouts=LedgerTimeouts.from_extra(connection.extra_dejson),
            address=ledger_address(connection),
        )
        if not migrate:
            return ledger
        checked = (self.postgres_conn_id, self.schema)
        if checked not in _VERSION_CHECKED:  # once per process: a task makes several ledgers
            ledger.check_version()
            _VERSION_CHECKED.add(checked)
        return ledger
