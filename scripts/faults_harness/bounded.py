"""What every network fault kind shares: the workers' links, a try bounded in time (a try still running at its
bound is killed and fails the trial as hung), and a fault placed inside the Spark read of a batch."""

from __future__ import annotations

import time
from collections.abc import Callable

from devstack.toxiproxy_api import Toxic
from faults_harness.context import MISSED, TrialError
from faults_harness.fault import Fault
from faults_harness.links import Links
from faults_harness.monitors import SPARK_START_TIMEOUT_S, wait_paused, wait_until
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker
from faults_harness.worker import PAUSE_ENV

KAFKA_LATENCY_MS = 150
"""Latency on the Kafka link from the read's start, so the cut lands inside a Spark job of a second."""


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


def during_read(
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
            # through spark-submit, once its app runs (the JVM up): the read is next, not the JVM's start
            started = (
                (lambda: p.attempt_running(w))
                if p.ctx.on_spark_connect
                else (lambda: p.attempt_running(w) and w.spark_app_running())
            )
            if not wait_until(started, w, SPARK_START_TIMEOUT_S, poll=0.05):
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


def held_for(links: Links, seconds: float, cut: Callable[[], None], what: str) -> str:
    cut()
    time.sleep(seconds)
    links.heal()
    return f"{what} for {seconds:.1f}s, then healed"


def at_pause(
    links: Links, point: str, bounded: Bounded, cut: Callable[[], None], said: Callable[[], str], hold_s: float = 0
) -> Callable[[Pipeline, Worker], str]:
    """A monitor: once the try paused at ``point``, ``cut`` a link and resume it; every link is healed after
    ``hold_s`` seconds, or (0) once the try ended or hit its bound. Returns ``said()``."""

    def monitor(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}the {w.step} try never reached {point} (worker ended {w.poll()})"
        cut()
        since = time.monotonic()
        w.resume()
        try:
            if hold_s:
                time.sleep(hold_s)
            else:
                bounded.wait(w, since)
        finally:
            links.heal()
        if hold_s:
            bounded.wait(w, since)
        return said()

    return monitor


def bound_checked(
    pipe: Pipeline, fault: Fault, bounded: Bounded, judge: Callable[[Worker], str | None] | None = None
) -> Fault:
    """``fault`` checked once its try ended: within its bound, then by ``judge`` (why its outcome is wrong,
    or None)."""

    def check() -> None:
        worker = faulted(pipe, fault.env)
        fault.outcome += "; " + bounded.check(worker)
        wrong = judge(worker) if judge else None
        if wrong:
            raise TrialError(wrong)

    fault.after = check
    return fault
