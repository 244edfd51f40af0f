"""The lease of a running Spark attempt, renewed by a background thread while spark-submit runs.

A worker killed mid-batch stops renewing; once the lease runs out, anyone reading the ledger
knows the attempt is dead (and may mark it so) without asking the worker. The Spark job itself
knows nothing about it.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from airflow_kafka_offsets.ledger.port import LedgerPort

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 120.0
"""How long an attempt counts as live without a heartbeat; renewed every quarter of it."""
DEFAULT_WAIT_S = 3600.0
"""How long a read waits for another run's live attempt of the same batch before giving up."""


class LeaseKeeper:
    """Context manager: renews ``attempt_id``'s lease every ``lease_s / 4`` seconds until exit.

    A renewal that fails (the database restarting) is logged and retried at the next beat. Once
    the ledger says the attempt is no longer running (declared dead), renewing stops; the attempt's
    end is then refused (see ``LedgerTransactionPort.finish_attempt``).
    """

    def __init__(self, ledger: LedgerPort, attempt_id: str, lease_s: float) -> None:
        self._ledger = ledger
        self._attempt_id = attempt_id
        self._lease_s = lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{attempt_id[:12]}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._lease_s / 4):
            try:
                with self._ledger.transaction() as tx:
                    held = tx.renew_lease(self._attempt_id, self._lease_s)
            except Exception as exc:  # the next beat tries again; the lease covers a few misses
                log.warning("attempt %s: could not renew its lease: %s", self._attempt_id, exc)
                continue
            if not held:
                log.warning(
                    "attempt %s was declared dead by another process; its output will be discarded", self._attempt_id
                )
                return

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
