"""What a worker says when its link to the ledger database fails: which ledger (host:port as configured),
which deadline fired (its value and the connection extra's key that overrides it) and what to do next.

The driver's own error (a psycopg2 ``OperationalError``: "timeout expired", "Connection timed out",
"terminating connection due to idle-in-transaction timeout") names none of these; these messages do.
Pure: the cause is read from the exception's text, a password in it is masked.
"""

from __future__ import annotations

import re

from airflow_kafka_offsets.core.timeouts import LedgerTimeouts
from airflow_kafka_offsets.ledger.answer_deadline import AnswerDeadlineExpired

_SECRET = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)
CONNECT_EXPIRED = "timeout expired"
"""libpq's words when ``connect_timeout`` ran out while opening a connection."""
TCP_TIMED_OUT = "connection timed out"
"""The kernel's ETIMEDOUT: ``tcp_user_timeout`` or the keepalives gave up on a silent peer."""
SERVER_CLOSED = "server closed the connection"
"""libpq's words when the server's side closed: a restart, or the server ended the session."""
IDLE_ENDED = "idle-in-transaction timeout"
"""The server ended the session's transaction after ``idle_in_transaction_session_timeout``."""


def is_operational(exc: BaseException) -> bool:
    """A driver's connection-level error (psycopg2's, psycopg 3's or SQLAlchemy's ``OperationalError``),
    told by class name so the ledger imports no driver."""
    return any(cls.__name__ == "OperationalError" for cls in type(exc).__mro__)


def cause(exc: BaseException) -> str:
    """The exception's class and first line, a ``password=...`` in it masked."""
    text = str(exc).strip()
    first = _SECRET.sub(r"\1***", text.splitlines()[0]) if text else "no detail"
    return f"{type(exc).__name__}: {first}"


def where(address: str | None) -> str:
    return f"the ledger database at {address}" if address else "the ledger database"


def connect_failed_message(address: str | None, exc: BaseException, timeouts: LedgerTimeouts) -> str:
    """A connection that could not be opened: nothing was read or written."""
    if CONNECT_EXPIRED in str(exc).lower():
        fired = (
            f"within connect_timeout {timeouts.connect_timeout} s (the ledger connection extra's key "
            "connect_timeout): the host did not answer in time (unreachable, partitioned or too slow)"
        )
        step = "check that PostgreSQL is up and reachable from this worker, or raise connect_timeout for a slow link"
    else:
        fired = "(refused or failed before any deadline)"
        step = "check the ledger connection's host, port, database and credentials and that PostgreSQL is up"
    return (
        f"could not open a connection to {where(address)} {fired} ({cause(exc)}); nothing was read or written: "
        f"{step}, then retry the task"
    )


def silence_bound(t: LedgerTimeouts) -> str:
    """How long a silent peer is waited for. On Linux a ``tcp_user_timeout`` also decides when unanswered
    keepalive probes give up (the probe count is then not used); without one the count does."""
    keys = "(keys of the ledger connection's extra)"
    if not t.keepalives and not t.tcp_user_timeout:
        return f"the operating system's retransmission limits only: keepalives and tcp_user_timeout are 0 {keys}"
    if not t.keepalives:
        return f"tcp_user_timeout {t.tcp_user_timeout} ms of unacknowledged data {keys}"
    if t.tcp_user_timeout:
        return (
            f"tcp_user_timeout {t.tcp_user_timeout} ms of unacknowledged data or of unanswered keepalive probes "
            f"(sent from keepalives_idle {t.keepalives_idle} s, every keepalives_interval {t.keepalives_interval} s) "
            f"{keys}"
        )
    return f"keepalives {t.keepalives_idle} s + {t.keepalives_count} x {t.keepalives_interval} s {keys}"


def deadline_fired(exc: BaseException, timeouts: LedgerTimeouts) -> str:
    """Which deadline ended the connection, as far as the driver's text tells."""
    text = str(exc).lower()
    t = timeouts
    if isinstance(exc, AnswerDeadlineExpired):
        waited = (
            f"answer_timeout {t.answer_timeout} ms"
            if exc.seconds * 1000 <= t.answer_timeout
            else f"statement_timeout {t.statement_timeout} ms + answer_timeout {t.answer_timeout} ms"
        )
        return (
            f"no answer came within {waited} (keys of the ledger connection's extra) while the link stayed up: "
            "something between them (a proxy, a pooler, a load balancer) keeps the connection open for a server "
            "that no longer answers"
        )
    if IDLE_ENDED in text:
        return (
            f"the server ended the transaction after idle_in_transaction_session_timeout "
            f"{t.idle_in_transaction_session_timeout} ms (the ledger connection extra's key)"
        )
    silent = silence_bound(t)
    if SERVER_CLOSED in text:
        return (
            "the server closed the connection: it restarted, or it ended the session (its transaction idle past "
            f"idle_in_transaction_session_timeout {t.idle_in_transaction_session_timeout} ms, a key of the ledger "
            f"connection's extra, or an operator ended it); a silent peer is given up on after {silent}"
        )
    if TCP_TIMED_OUT in text:
        return f"the peer went silent: this worker gave up after {silent}"
    return f"a silent peer is given up on after {silent}"


def lost_message(address: str | None, exc: BaseException, committing: bool, timeouts: LedgerTimeouts) -> str:
    """A connection lost inside a transaction; while committing the outcome is unknown to this worker."""
    outcome = (
        "while committing: the COMMIT may or may not have reached the database; the next run reads the "
        "outcome from the ledger (a committed batch is never committed again, a batch still planned is replayed)"
        if committing
        else "before committing: nothing this transaction wrote was kept"
    )
    at = f", ledger at {address}" if address else ""
    fired = deadline_fired(exc, timeouts)
    return (
        f"lost the connection to the ledger database {outcome} ({cause(exc)}{at}). {fired[0].upper()}{fired[1:]}; "
        "retry once the database answers"
    )
