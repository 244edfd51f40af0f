"""Ledger.transaction when the database connection is lost mid-transaction (a PostgreSQL restart)."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.ledger import Ledger


class ConnectionLost(Exception):
    pass


class BrokenConnection:
    """A DB-API connection whose server went away: every call after the first statement fails."""

    def __init__(self) -> None:
        self.closed = False

    def cursor(self):
        return self

    def execute(self, sql, params=None):
        if not sql.startswith("SET lock_timeout"):
            raise ConnectionLost("server closed the connection unexpectedly")

    def commit(self):
        raise ConnectionLost("the connection is lost")

    def rollback(self):
        raise ConnectionLost("the connection is lost")

    def close(self):
        self.closed = True


def test_a_lost_connection_reports_the_statement_that_failed_not_the_rollback():
    conn = BrokenConnection()
    ledger = Ledger(lambda: conn)
    with pytest.raises(ConnectionLost, match="server closed the connection unexpectedly"):
        with ledger.transaction() as tx:
            tx.execute("UPDATE {s}.cursors SET next_offset = 1")
    assert conn.closed
