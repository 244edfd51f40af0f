"""The deadlines every ledger connection gets unless its Airflow connection's extra says otherwise.

A ledger session whose peer goes silent (a partition, a dead NAT entry, a host gone without a
reset) must cost a stated number of seconds, not the operating system's two hours: libpq's
connect timeout, TCP keepalives and TCP user timeout bound the worker's side; the session's
``statement_timeout`` bounds a statement the server runs too long, and its
``idle_in_transaction_session_timeout`` (with server-side keepalives mirroring the client's) lets
the server roll back a dead worker's transaction and release the pipeline's locks on its own. The
``answer_timeout`` is the worker's own bound on each answer, for the peer no TCP deadline can see:
a middlebox (a proxy, a pooler, a load balancer) that acknowledges TCP for a server gone silent.

The extra's keys are libpq's and PostgreSQL's own names and units (seconds for the connect timeout
and keepalives, milliseconds for the rest); ``0`` turns a deadline off. Plain values: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from airflow_kafka_offsets.errors import ConfigurationError

DEFAULT_LOCK_TIMEOUT_S = 60.0
"""How long a ledger statement waits for a lock another run holds before PipelineBusyError."""


@dataclass(frozen=True)
class LedgerTimeouts:
    """One ledger connection's deadlines; field names are the connection extra's keys."""

    connect_timeout: int = 10
    """s: libpq gives up opening the connection (per host tried)."""
    keepalives: int = 1
    """1: TCP keepalives on (0 turns them off on both sides)."""
    keepalives_idle: int = 10
    """s of silence before the first keepalive probe."""
    keepalives_interval: int = 5
    """s between unanswered probes."""
    keepalives_count: int = 3
    """unanswered probes before the connection counts as dead."""
    tcp_user_timeout: int = 30_000
    """ms that sent data may stay unacknowledged before the kernel drops the connection."""
    statement_timeout: int = 300_000
    """ms a statement may run; longer than the lock timeout, so a lock wait still ends as PipelineBusyError."""
    idle_in_transaction_session_timeout: int = 300_000
    """ms a transaction may sit idle (its worker publishing output, or gone) before the server ends it."""
    answer_timeout: int = 30_000
    """ms the worker waits for an answer beyond what the server may take: a COMMIT's for this long, a statement's
    for ``statement_timeout`` plus this; then it shuts the connection's socket."""

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> LedgerTimeouts:
        """The defaults with the extra's values for any of these keys; a value that is not a whole
        number of at least 0 is refused, naming the key."""
        given: dict[str, int] = {}
        for name in KEYS:
            if name not in extra:
                continue
            value = extra[name]
            try:
                number = int(str(value).strip())
            except ValueError:
                number = -1
            if number < 0 or (name == "keepalives" and number > 1):
                raise ConfigurationError(
                    f"ledger connection extra {name!r} is {value!r}: give a whole number of "
                    f"{UNITS[name]} (0 turns it off)"
                )
            given[name] = number
        return replace(cls(), **given)

    def check_lock_timeout(self, lock_timeout_s: float) -> None:
        """Refuse a statement deadline that would cut a lock wait short (it would end as a statement
        timeout, not as PipelineBusyError naming the other run)."""
        if 0 < self.statement_timeout <= lock_timeout_s * 1000:
            raise ConfigurationError(
                f"ledger connection extra statement_timeout is {self.statement_timeout} ms, not longer than the "
                f"ledger's lock timeout of {lock_timeout_s * 1000:.0f} ms: raise it (or set 0 to turn it off)"
            )

    def commit_deadline_s(self) -> float | None:
        """Seconds the worker waits for the answer to a COMMIT (or a ROLLBACK); None: no client-side bound."""
        return self.answer_timeout / 1000 if self.answer_timeout else None

    def statement_deadline_s(self) -> float | None:
        """Seconds the worker waits for a statement's answer: the server's own limit first (its cancel is an
        answer), then ``answer_timeout``; None when either is off (a statement may then run as long as it takes)."""
        if not self.answer_timeout or not self.statement_timeout:
            return None
        return (self.statement_timeout + self.answer_timeout) / 1000

    def libpq_parameters(self) -> dict[str, int]:
        """What the worker's libpq applies (connection keywords of psycopg2 / a SQLAlchemy URL's query)."""
        return {name: getattr(self, name) for name in CLIENT_KEYS}

    def session_settings(self) -> dict[str, int]:
        """What each session SETs on the server: the two deadlines, and keepalives for the server's side of
        the socket (so a partitioned worker's session is ended as soon as the worker notices too)."""
        settings = {
            "statement_timeout": self.statement_timeout,
            "idle_in_transaction_session_timeout": self.idle_in_transaction_session_timeout,
        }
        if self.keepalives:
            settings |= {
                "tcp_keepalives_idle": self.keepalives_idle,
                "tcp_keepalives_interval": self.keepalives_interval,
                "tcp_keepalives_count": self.keepalives_count,
            }
        return settings | {"tcp_user_timeout": self.tcp_user_timeout}

    def set_statement(self) -> str:
        """One ``SET`` per session setting, as one statement string (one round trip)."""
        return "; ".join(f"SET {name} = {value}" for name, value in self.session_settings().items())

    def session_options(self) -> str:
        """The session settings as libpq's ``options`` (for sessions the package does not open itself: the
        Iceberg catalog's engine)."""
        return " ".join(f"-c {name}={value}" for name, value in self.session_settings().items())


CLIENT_KEYS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
"""The keys libpq takes itself."""
KEYS = tuple(f.name for f in fields(LedgerTimeouts))
"""Every key of the connection extra that sets a ledger deadline (never passed to the driver but CLIENT_KEYS)."""
UNITS = {
    "connect_timeout": "seconds",
    "keepalives": "0 or 1",
    "keepalives_idle": "seconds",
    "keepalives_interval": "seconds",
    "keepalives_count": "probes",
    "tcp_user_timeout": "milliseconds",
    "statement_timeout": "milliseconds",
    "idle_in_transaction_session_timeout": "milliseconds",
    "answer_timeout": "milliseconds",
}
