"""The PostgreSQL ledger: pipelines, cursors, write-ahead batch plans, attempts and an audit trail.

:class:`Ledger` opens connections and transactions and migrates the schema; a
:class:`LedgerTransaction` is the statements of every aggregate, each in its own module:
``pipelines`` (specs and cursors), ``batches`` (plans, ranges, aborts), ``commits`` (the commit and
what committed batches hold), ``attempts`` (Spark attempts and their leases), ``resets`` and
``audit`` and ``decodings``. It implements :mod:`~airflow_kafka_offsets.ledger.port`.

PostgreSQL enforces the contract where it can: the pipeline row lock
serialises planning, a partial unique index allows one planned batch per
pipeline, a statement-level check keeps live ranges of one epoch from overlapping,
and the commit is a compare-and-set on the cursors inside the transaction that
marks the batch committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from airflow_kafka_offsets import __version__
from airflow_kafka_offsets.core.timeouts import DEFAULT_LOCK_TIMEOUT_S, LedgerTimeouts
from airflow_kafka_offsets.errors import (
    LedgerConnectionLostError,
    LedgerSchemaTooNewError,
    LedgerStatementTimeoutError,
    LedgerUnreachableError,
    PipelineBusyError,
)
from airflow_kafka_offsets.ledger.answer_deadline import AnswerDeadlineExpired, BoundedCursor, answer_within
from airflow_kafka_offsets.ledger.attempts import AttemptStatements
from airflow_kafka_offsets.ledger.batches import BatchRecord, BatchStatements
from airflow_kafka_offsets.ledger.commits import CommitStatements
from airflow_kafka_offsets.ledger.decodings import DecodingStatements
from airflow_kafka_offsets.ledger.history import HistoryStatements
from airflow_kafka_offsets.ledger.link_errors import connect_failed_message, is_operational, lost_message
from airflow_kafka_offsets.ledger.port import OwnTransactionReads
from airflow_kafka_offsets.ledger.resets import ResetStatements
from airflow_kafka_offsets.ledger.schema import MIGRATIONS, SCHEMA_VERSION, quote_schema

LOCK_NOT_AVAILABLE = "55P03"
QUERY_CANCELED = "57014"


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


def _broken(conn: Any) -> bool:
    """The connection itself failed (psycopg2 marks it ``closed == 2``, psycopg 3 ``broken``), not a statement."""
    return getattr(conn, "broken", False) is True or getattr(conn, "closed", 0) == 2


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # already broken: nothing left to release
        pass


class LedgerTransaction(
    ResetStatements, BatchStatements, CommitStatements, AttemptStatements, HistoryStatements, DecodingStatements
):
    """Statements inside one open transaction; use :meth:`Ledger.transaction`."""


class Ledger(OwnTransactionReads):
    """Entry point: migrations and transactions on connections from ``connect``."""

    def __init__(
        self,
        connect: Callable[[], Any],
        schema: str = "kafka_offsets",
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        catalog_uri: str | Callable[[], str] | None = None,
        timeouts: LedgerTimeouts | None = None,
        address: str | None = None,
    ):
        """``catalog_uri``: the same database as a SQLAlchemy URL, for the Iceberg catalog kept beside the ledger
        (or how to make it, once, when a sink first asks). ``timeouts``: the deadlines; every session gets their
        server-side settings here (the client-side ones are ``connect``'s to apply, see ``LedgerHook``).
        ``address``: the database's ``host:port`` as configured, named in connection errors."""
        quote_schema(schema)
        self.schema = schema
        self.address = address
        self._catalog_uri: str | Callable[[], str] | None = catalog_uri
        self._connect = connect
        self._lock_timeout_ms = int(lock_timeout_s * 1000)
        self.timeouts = timeouts or LedgerTimeouts()
        self.timeouts.check_lock_timeout(lock_timeout_s)
        self._session_sql = f"SET lock_timeout = {self._lock_timeout_ms}; {self.timeouts.set_statement()}"
        self._idle: Any = None  # one connection kept between transactions (a task runs about five)
        self._idle_lock = threading.Lock()

    @property
    def catalog_uri(self) -> str | None:
        if callable(self._catalog_uri):
            self._catalog_uri = self._catalog_uri()
        return self._catalog_uri

    def _checkout(self) -> Any:
        """The idle connection if it still answers, else a new one; either way with the lock timeout and the
        session deadlines set (one round trip)."""
        with self._idle_lock:
            conn, self._idle = self._idle, None
        statement_s = self.timeouts.statement_deadline_s()
        if conn is not None:
            try:
                with answer_within(conn, statement_s):
                    conn.cursor().execute(self._session_sql)
                return conn
            except Exception:  # the server restarted or dropped it since: nothing ran on it yet
                _close_quietly(conn)
        try:
            conn = self._connect()
        except Exception as exc:
            if is_operational(exc):  # libpq's "timeout expired", a refusal: say which ledger and which deadline
                raise LedgerUnreachableError(connect_failed_message(self.address, exc, self.timeouts)) from exc
            raise
        try:
            with answer_within(conn, statement_s):
                conn.cursor().execute(self._session_sql)
        except BaseException as exc:
            lost = isinstance(exc, Exception) and (_broken(conn) or isinstance(exc, AnswerDeadlineExpired))
            _close_quietly(conn)
            if lost:  # opened, then silent or closed before its first statement was answered
                raise LedgerConnectionLostError(lost_message(self.address, exc, False, self.timeouts)) from exc
            raise
        return conn

    def _checkin(self, conn: Any) -> None:
        with self._idle_lock:
            conn, self._idle = (conn, None) if self._idle is not None else (None, conn)
        if conn is not None:
            _close_quietly(conn)

    def close(self) -> None:
        """Close the idle connection (transactions open a new one when needed)."""
        with self._idle_lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            _close_quietly(conn)

    @contextmanager
    def transaction(self, read_only: bool = False, long_statements: bool = False) -> Iterator[LedgerTransaction]:
        """One transaction: committed on success, rolled back on any error (and its connection dropped).

        ``read_only``: PostgreSQL refuses any write in it (for pages and reports that only look).
        ``long_statements``: its statements may run past ``statement_timeout`` (a migration), so the worker
        sets no deadline on their answers (the COMMIT's stays).
        """
        conn = self._checkout()
        committing = False
        commit_s = self.timeouts.commit_deadline_s()
        try:
            statement_s = None if long_statements else self.timeouts.statement_deadline_s()
            cursor = BoundedCursor(conn.cursor(), conn, statement_s)
            if read_only:
                cursor.execute("SET TRANSACTION READ ONLY")
            yield LedgerTransaction(cursor, self.schema)
            committing = True
            with answer_within(conn, commit_s):
                conn.commit()
        except BaseException as exc:
            lost = isinstance(exc, Exception) and (_broken(conn) or isinstance(exc, AnswerDeadlineExpired))
            try:
                with answer_within(conn, commit_s):
                    conn.rollback()
            except Exception:  # connection lost (server restart): the server rolled back; report the cause
                pass
            _close_quietly(conn)
            if _sqlstate(exc) == LOCK_NOT_AVAILABLE:
                raise PipelineBusyError(
                    f"gave up after {self._lock_timeout_ms / 1000:.0f}s waiting for a ledger lock held by "
                    "another run of the same pipeline"
                ) from exc
            if _sqlstate(exc) == QUERY_CANCELED and "statement timeout" in str(exc):
                raise LedgerStatementTimeoutError(
                    f"a ledger statement ran past statement_timeout ({self.timeouts.statement_timeout} ms, the "
                    "ledger connection extra's key); the transaction was rolled back, nothing it wrote was kept"
                ) from exc
            if lost:
                raise LedgerConnectionLostError(lost_message(self.address, exc, committing, self.timeouts)) from exc
            raise
        self._checkin(conn)

    def schema_version(self) -> int | None:
        with self.transaction() as tx:
            if not tx.table_exists("schema_version"):
                return None
            row = tx.fetchone("SELECT version FROM {s}.schema_version")
            return None if row is None else int(row[0])

    def migrate(self) -> int:
        """Create or upgrade the ledger schema; safe to call from many runs at once."""
        with self.transaction(long_statements=True) as tx:
            # a migration of a large ledger may rewrite tables for longer than a statement's usual deadline
            tx.execute("SET LOCAL statement_timeout = 0")
            # The extension is the database's, shared by every ledger schema in it: two first migrations of two
            # schemas at once both try to create it ("IF NOT EXISTS" is no lock), so the database-wide lock
            # comes first, then the schema's.
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("airflow_kafka_offsets:extensions",))
            tx.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"airflow_kafka_offsets:{self.schema}",))
            tx.execute("CREATE SCHEMA IF NOT EXISTS {s}")
            tx.execute(
                "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
                " singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),"
                " version integer NOT NULL, package_version text NOT NULL,"
                " migrated_at timestamptz NOT NULL DEFAULT now())"
            )
            row = tx.fetchone("SELECT version FROM {s}.schema_version")
            current = 0 if row is None else int(row[0])
            if current > SCHEMA_VERSION:
                raise LedgerSchemaTooNewError(
                    f"ledger schema {self.schema!r} is at version {current}, newer than version {SCHEMA_VERSION} "
                    f"known to airflow-kafka-offsets {__version__}: upgrade the package"
                )
            for statements in MIGRATIONS[current:]:
                for statement in statements:
                    tx.execute(statement)
            tx.execute(
                "INSERT INTO {s}.schema_version (version, package_version) VALUES (%s, %s)"
                " ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version,"
                " package_version = EXCLUDED.package_version, migrated_at = now()"
                " WHERE {s}.schema_version.version < EXCLUDED.version",
                (SCHEMA_VERSION, __version__),
            )
            return SCHEMA_VERSION

    def check_version(self) -> None:
        """Refuse to work on a ledger this package does not know (missing or newer)."""
        version = self.schema_version()
        if version is None or version < SCHEMA_VERSION:
            self.migrate()
        elif version > SCHEMA_VERSION:
            raise LedgerSchemaTooNewError(
                f"ledger schema {self.schema!r} is at version {version}, newer than version {SCHEMA_VERSION} "
                f"known to airflow-kafka-offsets {__version__}: upgrade the package"
            )

    def committed_batches(self, pipeline: str) -> list[BatchRecord]:
        with self.transaction() as tx:
            return [tx.batch(pipeline, batch_id) for batch_id in tx.committed_batch_ids(pipeline)]

    def contiguity_problems(self, pipeline: str) -> list[str]:
        """Gaps or overlaps between consecutive committed ranges of each partition (I1); empty when sound."""
        with self.transaction() as tx:
            return tx.contiguity_problems(pipeline)
