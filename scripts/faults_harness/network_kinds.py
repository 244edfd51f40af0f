"""The network fault kinds (``scripts/faults --network``): a worker's link to one service, through the
stack's toxiproxy (:mod:`faults_harness.links`), black-holed, cut, reset or slowed at a chosen moment of
its try, then healed before the next try. Each also checks the try ended within a bound: a try still
running then is killed and the trial fails saying it hung."""

from __future__ import annotations

import time
from collections.abc import Callable

from devstack.toxiproxy_api import Toxic, both_ways
from faults_harness.context import MISSED, TrialError
from faults_harness.fault import Fault
from faults_harness.links import Links
from faults_harness.monitors import SPARK_START_TIMEOUT_S, wait_paused, wait_until
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker
from faults_harness.worker import PAUSE_ENV

LEDGER_IDLE_MS = 2000
"""The black-holed commit's ledger connection: its ``idle_in_transaction_session_timeout`` (connection extra)."""
LEDGER_BOUND_S = LEDGER_IDLE_MS / 1000 + 20
"""A commit whose ledger went silent must have failed by then: the server ends the idle transaction, and
its close reaches the worker through the proxy (20 s for a loaded machine)."""
READ_BOUND_S = 150.0
"""A read whose Kafka or Spark Connect link was cut and healed must have ended by then."""
LEASE_S = 3
"""The slowed read's attempt lease (``[kafka_offsets] attempt_lease_seconds``)."""
LEDGER_LATENCY_MS = 500
"""Latency each way on the slowed ledger link: a renewal's round trips (a new connection, its SETs, the
UPDATE) take longer than the lease, a connection still opens within libpq's 10 s connect timeout."""
KAFKA_LATENCY_MS = 150
"""Latency on the Kafka link from the read's start, so the cut lands inside a Spark job of a second."""
LEASE_ENV = "AIRFLOW__KAFKA_OFFSETS__ATTEMPT_LEASE_SECONDS"


def links_of(pipe: Pipeline) -> Links:
    if pipe.ctx.links is None:
        raise TrialError("a network fault kind needs the workers' links through toxiproxy: run with --network")
    return pipe.ctx.links


class Bounded:
    """Whether the faulted try ended within its bound; a try that did not is killed and fails the trial."""

    def __init__(self, bound_s: float, what: str) -> None:
        self.bound_s, self.what = bound_s, what
        self.hung = False
        self.took = 0.0

    def wait(self, worker: Worker, since: float) -> None:
        left = self.bound_s - (time.monotonic() - since)
        if not wait_until(lambda: not worker.alive(), worker, max(left, 0.0), poll=0.1) and worker.alive():
            self.hung = True
            worker.kill_group()
        self.took = time.monotonic() - since

    def check(self, worker: Worker) -> str:
        if self.hung:
            raise TrialError(
                f"the {worker.step} try hung: still running {self.bound_s:.0f}s after {self.what}, beyond its bound; "
                f"killed (log {worker.log})"
            )
        return (
            f"the try {'ended ok' if worker.ok else 'failed: ' + str(worker.error)} {self.took:.1f}s after {self.what}"
        )


def faulted(pipe: Pipeline, marker: dict[str, str]) -> Worker:
    """The try a fault's ``env`` was injected into."""
    (worker,) = [w for w in pipe.workers if all(w.env.get(k) == v for k, v in marker.items())]
    return worker


def ledger_blackhole(pipe: Pipeline) -> Fault:
    """The commit's ledger link black-holed both ways with its transaction open after publishing (toxiproxy's
    ``timeout`` toxic: nothing passes, nothing is closed), healed once the try ended. The server ends the
    idle transaction (the connection's ``idle_in_transaction_session_timeout``), its close reaches the
    worker, the try fails; the next try commits the batch once."""
    links = links_of(pipe)
    bounded = Bounded(LEDGER_BOUND_S, "the ledger link went silent")
    env = {
        PAUSE_ENV: "after_publish",
        "AIRFLOW_CONN_POSTGRES_DEFAULT": links.ledger_connection(idle_in_transaction_session_timeout=LEDGER_IDLE_MS),
    }

    def monitor(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}the commit never reached after_publish (worker ended {w.poll()})"
        links.add("postgres", both_ways("blackhole", "timeout", timeout=0))
        cut = time.monotonic()
        w.resume()
        try:
            bounded.wait(w, cut)
        finally:
            links.heal()
        return (
            "ledger link black-holed with the commit transaction open after publishing, "
            f"healed {bounded.took:.1f}s later"
        )

    fault = Fault("commit", env, monitor=monitor, description="ledger link black-holed inside the commit")

    def check() -> None:
        worker = faulted(pipe, env)
        fault.outcome += "; " + bounded.check(worker)
        if worker.ok:
            raise TrialError(f"a commit whose ledger went silent should fail, it returned {worker.result}")

    fault.after = check
    return fault


def _during_read(
    pipe: Pipeline, description: str, inject: Callable[[Links], str], bound_s: float, env: dict[str, str] | None = None
) -> tuple[Fault, Bounded]:
    """A fault of the read step: its Kafka link slowed from the start (so a Spark job of a second lasts
    long enough to be hit), ``inject`` once its attempt is recorded running, every link healed once the
    try ended (or was killed at ``bound_s``)."""
    links = links_of(pipe)
    bounded = Bounded(bound_s, "the fault")
    env = {PAUSE_ENV: "before_step", **(env or {})}

    def monitor(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}the read never started (worker ended {w.poll()})"
        links.add("kafka", [Toxic("slow_kafka", "latency", "downstream", {"latency": KAFKA_LATENCY_MS})])
        w.resume()
        try:
            if not wait_until(lambda: p.attempt_running(w), w, SPARK_START_TIMEOUT_S, poll=0.05):
                return f"{MISSED}no Spark attempt ran (worker ended {w.poll()})"
            phase = p.spark_phase(w)
            if phase == "staged":
                return f"{MISSED}the Spark attempt had staged its output before the fault"
            did = inject(links)
            bounded.wait(w, time.monotonic())
        finally:
            links.heal()
        return f"{did} while the Spark attempt ran (phase {phase})"

    return Fault("read", env, monitor=monitor, description=description), bounded


def _hold(links: Links, seconds: float, cut: Callable[[], None], what: str) -> str:
    cut()
    time.sleep(seconds)
    links.heal()
    return f"{what} for {seconds:.1f}s, then healed"


def kafka_cut(pipe: Pipeline) -> Fault:
    """The Kafka link cut during the Spark read (the proxy disabled: connections closed, new ones refused),
    healed a few seconds later: the attempt fails or finishes; the batch is read once."""
    hold = pipe.rng.uniform(1.0, 3.0)

    def inject(links: Links) -> str:
        return _hold(links, hold, lambda: links.client.set_enabled("kafka", False), "Kafka link cut")

    fault, bounded = _during_read(pipe, "Kafka link cut during the Spark read", inject, READ_BOUND_S)
    return _checked(pipe, fault, bounded)


def connect_reset(pipe: Pipeline) -> Fault:
    """The Spark Connect link reset mid-batch (toxiproxy's ``reset_peer``: every connection closed with a
    TCP RST), healed a moment later: the try fails, or the client's retries carry it through; the batch is
    read once."""
    hold = pipe.rng.uniform(0.5, 2.0)

    def inject(links: Links) -> str:
        reset = [Toxic("reset", "reset_peer", "downstream", {"timeout": 0})]
        return _hold(links, hold, lambda: links.add("spark_connect", reset), "Spark Connect link reset")

    fault, bounded = _during_read(pipe, "Spark Connect link reset mid-batch", inject, READ_BOUND_S)
    return _checked(pipe, fault, bounded)


def slow_ledger(pipe: Pipeline) -> Fault:
    """The ledger link slowed (toxiproxy's ``latency`` both ways) during the Spark job past the attempt's
    lease: the try must fail saying it lost its lease (never 'wrote no report'); the next try reads and
    commits the batch once."""
    env = {LEASE_ENV: str(LEASE_S)}

    def inject(links: Links) -> str:
        links.add("postgres", both_ways("slow_ledger", "latency", latency=LEDGER_LATENCY_MS))
        return f"ledger link slowed by {LEDGER_LATENCY_MS} ms each way (lease {LEASE_S}s)"

    fault, bounded = _during_read(pipe, "ledger link slowed past the attempt lease", inject, READ_BOUND_S, env)
    checked = _checked(pipe, fault, bounded)
    after = checked.after

    def check() -> None:
        assert after is not None
        after()
        worker = faulted(pipe, fault.env)
        if worker.ok or "lost its lease" not in str(worker.error):
            raise TrialError(
                f"a read whose ledger link outlasted its lease should fail saying so: {worker.result or worker.error}"
            )

    checked.after = check
    return checked


def _checked(pipe: Pipeline, fault: Fault, bounded: Bounded) -> Fault:
    def check() -> None:
        fault.outcome += "; " + bounded.check(faulted(pipe, fault.env))

    fault.after = check
    return fault


NETWORK_KINDS: dict[str, Callable[[Pipeline], Fault]] = {
    "ledger_blackhole": ledger_blackhole,
    "kafka_cut": kafka_cut,
    "connect_reset": connect_reset,
    "slow_ledger": slow_ledger,
}
