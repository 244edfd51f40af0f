"""The worker's own bound on waiting for the ledger's answer: past it, the connection's socket is shut.

Keepalives and ``tcp_user_timeout`` end a connection whose peer stops acknowledging TCP. A middlebox
(a proxy, a pooler, a load balancer) keeps acknowledging for a server that no longer answers, so
neither fires and a blocked driver call waits forever. Shutting the socket from another thread makes
the driver's wait end at once as a lost connection (psycopg2 and psycopg 3 both release the GIL
while they wait), which the ledger reports like any other: the next try reads the outcome.

One daemon thread per process keeps the deadlines (arming one costs microseconds, a thread each
would cost a round trip); after a fork the child starts its own.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class _Alarm:
    at: float
    seq: int
    fileno: int = field(compare=False)
    fired: bool = field(default=False, compare=False)
    disarmed: bool = field(default=False, compare=False)


def shut_socket(fileno: int) -> None:
    """Shut both directions of the socket behind ``fileno`` (a duplicate is closed, the driver's stays open:
    its next read sees the end of the stream)."""
    try:
        sock = socket.socket(fileno=os.dup(fileno))
    except OSError:  # already closed
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # not connected any more
        pass
    finally:
        sock.close()


class Watchdog:
    """Deadlines on sockets, kept by one thread; an alarm that fires shuts its socket."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._alarms: list[_Alarm] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fileno: int) -> _Alarm:
        alarm = _Alarm(time.monotonic() + seconds, next(self._seq), fileno)
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ledger-answer-deadline", daemon=True)
                self._thread.start()
            heapq.heappush(self._alarms, alarm)
            self._cond.notify()
        return alarm

    def disarm(self, alarm: _Alarm) -> bool:
        """Whether the alarm had fired; once this returns, its socket is never shut by it."""
        with self._cond:
            alarm.disarmed = True
            return alarm.fired

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._alarms and self._alarms[0].disarmed:
                    heapq.heappop(self._alarms)
                if not self._alarms:
                    self._cond.wait()
                    continue
                wait = self._alarms[0].at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                alarm = heapq.heappop(self._alarms)
                alarm.fired = True
                shut_socket(alarm.fileno)  # under the lock: a disarm that returned never races a shut


_WATCHDOG = Watchdog()


def _new_watchdog_after_fork() -> None:
    global _WATCHDOG
    _WATCHDOG = Watchdog()


os.register_at_fork(after_in_child=_new_watchdog_after_fork)


class AnswerDeadlineExpired(Exception):
    """Raised in place of the driver's error when the deadline shut the socket; the ledger maps it."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the worker shut the connection after {seconds:g} s without an answer")
        self.seconds = seconds


@contextmanager
def answer_within(conn: Any, seconds: float | None) -> Iterator[None]:
    """Wait for ``conn``'s answer inside the block at most ``seconds`` (None: no bound, or a connection
    whose socket the driver does not show)."""
    fileno = _fileno(conn) if seconds is not None else None
    if fileno is None or seconds is None:
        yield
        return
    alarm = _WATCHDOG.arm(seconds, fileno)
    try:
        yield
    except Exception as exc:
        if _WATCHDOG.disarm(alarm):
            raise AnswerDeadlineExpired(seconds) from exc
        raise
    _WATCHDOG.disarm(alarm)  # fired after the answer came: the socket is shut, the next use reconnects


def _fileno(conn: Any) -> int | None:
    try:
        return int(conn.fileno())
    except Exception:  # a driver or wrapper without one, or a closed connection
        return None


class BoundedCursor:
    """A DB-API cursor whose ``execute`` waits for the answer at most ``seconds``."""

    def __init__(self, cursor: Any, conn: Any, seconds: float | None) -> None:
        self._cursor = cursor
        self._conn = conn
        self.seconds = seconds

    def execute(self, sql: str, params: Any = None) -> Any:
        with answer_within(self._conn, self.seconds):
            return self._cursor.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)
