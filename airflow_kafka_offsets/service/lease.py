"""The lease of a running Spark attempt, renewed by a background thread while spark-submit runs.

A worker killed mid-batch stops renewing; once the lease runs out, anyone reading the ledger
knows the attempt is dead (and may mark it so) without asking the worker. The Spark job itself
knows nothing about it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType

from airflow_kafka_offsets.ledger.port import LedgerPort

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 120.0
"""How long an attempt counts as live without a heartbeat; renewed every quarter of it."""
DEFAULT_WAIT_S = 3600.0
"""How long a read waits for another run's live attempt of the same batch before giving up."""
EXIT_WAIT_S = 2.0
"""How long leaving a LeaseKeeper waits for a renewal in flight. One stuck on a silent ledger is left
behind (a daemon thread, its calls bounded by the ledger connection's deadlines): the attempt's end
never waits for the network to heal."""


@dataclass(frozen=True)
class LeaseLoss:
    """When and why an attempt stopped holding its lease."""

    at: datetime
    why: str


class LeaseKeeper:
    """Context manager: renews ``attempt_id``'s lease every ``lease_s / 4`` seconds until exit.

    A renewal that fails (the database restarting) is logged and retried at the next beat; the
    lease is lost once the ledger refuses a renewal (the attempt was declared dead, or its lease had
    run out: a lapsed lease is never revived) or once the lease runs out before any renewal reached
    the ledger. A lost lease means the attempt must not be recorded as succeeded (see
    :attr:`lost` and ``LedgerTransactionPort.finish_attempt``).
    """

    def __init__(self, ledger: LedgerPort, attempt_id: str, lease_s: float) -> None:
        self._ledger = ledger
        self._attempt_id = attempt_id
        self._lease_s = lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{attempt_id[:12]}", daemon=True)
        self._expires = time.monotonic() + lease_s  # the attempt started with a full lease just before
        self._refused: LeaseLoss | None = None

    def _run(self) -> None:
        while not self._stop.wait(self._lease_s / 4):
            sent = time.monotonic()
            try:
                with self._ledger.transaction() as tx:
                    held = tx.renew_lease(self._attempt_id, self._lease_s)
            except Exception as exc:  # the next beat tries again; the lease covers a few misses
                log.warning("attempt %s: could not renew its lease: %s", self._attempt_id, exc)
                continue
            if not held:
                self._refused = LeaseLoss(
                    datetime.now(UTC),
                    "the ledger no longer held it running (declared dead by another process, or its lease had "
                    "run out before a renewal reached the ledger)",
                )
                log.warning("attempt %s lost its lease; its output will be discarded", self._attempt_id)
                return
            self._expires = sent + self._lease_s  # the server's expiry is later still: this errs on the safe side

    @property
    def lost(self) -> LeaseLoss | None:
        """Why the lease is no longer held, or None while it is (asked while renewing, or right after: once
        the keeper has exited, nothing renews it)."""
        if self._refused is not None:
            return self._refused
        overdue = time.monotonic() - self._expires
        if overdue >= 0:
            return LeaseLoss(
                datetime.now(UTC) - timedelta(seconds=overdue),
                f"no renewal reached the ledger within its {self._lease_s:g}s lease",
            )
        return None

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(EXIT_WAIT_S)
        if self._thread.is_alive():
            log.warning(
                "attempt %s: a lease renewal is still waiting for the ledger; not waiting for it", self._attempt_id
            )
