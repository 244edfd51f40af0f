"""Named crash points for fault-injection runs (``scripts/faults``).

With ``AIRFLOW_KAFKA_OFFSETS_CRASH_AT=<point>`` in its environment, a process
kills itself with SIGKILL when it reaches that point, exactly like a worker
that dies there. Without the variable this costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "AIRFLOW_KAFKA_OFFSETS_CRASH_AT"
CRASH_POINTS = (
    "after_plan",  # the plan is in the ledger, nothing read yet
    "after_spark",  # Spark staged the output and the attempt is recorded, nothing published
    "after_publish",  # output published to its final location, ledger not committed
    "in_commit_transaction",  # cursor advanced and batch marked committed, transaction still open
    "after_commit",  # committed, staging not yet cleaned up
)


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
