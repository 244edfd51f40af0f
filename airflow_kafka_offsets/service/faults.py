"""Named crash points for fault-injection runs (``scripts/faults``).

With ``AIRFLOW_KAFKA_OFFSETS_CRASH_AT=<point>`` in its environment, a process
kills itself with SIGKILL when it reaches that point, exactly like a worker
that dies there. Without the variable this costs one dictionary lookup.
A harness can also observe the points (to pause a worker there) through
:func:`add_observer` instead of replacing functions.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

CRASH_ENV = "AIRFLOW_KAFKA_OFFSETS_CRASH_AT"
CRASH_POINTS = (
    "after_plan",  # the plan is in the ledger, nothing read yet
    "after_spark",  # Spark staged the output and the attempt is recorded, nothing published
    "after_publish",  # output published to its final location, ledger not committed
    "in_commit_transaction",  # cursor advanced and batch marked committed, transaction still open
    "after_commit",  # committed, staging not yet cleaned up
)
_observers: list[Callable[[str], None]] = []


class UnknownCrashPointError(ValueError):
    """A crash point (in the code or in the environment) that is not in CRASH_POINTS."""


def add_observer(observer: Callable[[str], None]) -> None:
    """Call ``observer(name)`` at every crash point reached, before any crash."""
    _observers.append(observer)


def check_crash_env() -> None:
    """Refuse a misspelt point in the environment: it would never fire, and a trial would pass vacuously."""
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted not in CRASH_POINTS:
        raise UnknownCrashPointError(f"{CRASH_ENV}={wanted!r} is not one of {', '.join(CRASH_POINTS)}")


def crash_point(name: str) -> None:
    if name not in CRASH_POINTS:
        raise UnknownCrashPointError(f"crash point {name!r} is not registered in CRASH_POINTS")
    for observer in _observers:
        observer(name)
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
