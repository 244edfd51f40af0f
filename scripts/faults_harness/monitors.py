"""What fault monitors watch and do: wait for a moment of a worker's try, kill it there, restart a
service of the stack under it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import devstack
from faults_harness.context import MISSED, Context
from faults_harness.fault import Monitor
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker

SPARK_START_TIMEOUT_S = 240.0


def wait_until(cond: Callable[[], bool], worker: Worker, timeout: float, poll: float = 0.05) -> bool:
    """Poll ``cond`` while the worker lives; False if it exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        if not worker.alive():
            return cond()
        time.sleep(poll)
    return False


def wait_spark_app(worker: Worker) -> bool:
    return wait_until(worker.spark_app_running, worker, SPARK_START_TIMEOUT_S, poll=0.1)


def kill_in_spark(pipe: Pipeline, worker: Worker, *, target: str, whole_group: bool) -> str:
    """SIGKILL during the Spark job: ``target`` 'read' (a random moment before the Parquet write
    starts) or 'write' (as soon as Spark's _temporary directory appears)."""
    if not wait_spark_app(worker):
        return f"{MISSED}Spark never ran (worker ended {worker.poll()})"
    started = time.monotonic()
    if target == "read":
        delay = pipe.rng.uniform(0.0, 4.0)
        wait_until(lambda: time.monotonic() - started >= delay or pipe.spark_phase(worker) != "none", worker, 60)
    else:
        wait_until(lambda: pipe.spark_phase(worker) != "none", worker, 180, poll=0.02)
    phase = pipe.spark_phase(worker)
    at = time.monotonic() - started
    if not worker.alive():
        return f"{MISSED}worker ended before the kill (phase {phase})"
    if whole_group:
        worker.kill_group()
        what = "worker + spark-submit/JVM/driver (process group)"
    else:
        worker.kill_worker_only()
        what = "worker only, Spark left running as an orphan"
        pipe.orphans.append(worker.pid)
    moment = {
        "none": "before the Parquet write started",
        "writing": "while Parquet was being written",
        "staged": "after Spark staged its output",
    }[phase]
    return f"SIGKILL {what} {at:.1f}s into the Spark app, {moment}"


def restart(service: str, **kwargs: Any) -> str:
    """Restart a stack service; if its port was taken meanwhile (the stack's ports are in the
    ephemeral range: any process binding port 0 can get one while the service is down), start it
    again on the same port as soon as the port is free. Returns a note on such a delay."""
    restarts: dict[str, Callable[..., None]] = {
        "kafka": devstack.restart_kafka,
        "postgres": devstack.restart_postgres,
        "s3": devstack.restart_s3,
        "iceberg_rest": devstack.restart_iceberg_rest,
    }
    what = restarts[service]
    try:
        what(**kwargs)
        return ""
    except devstack.StackError as exc:
        first = str(exc).splitlines()[0]
    deadline = time.monotonic() + 180
    began = time.monotonic()
    while True:
        time.sleep(2)
        try:
            devstack.up()
            return f" (restart delayed {time.monotonic() - began:.0f}s: {first})"
        except devstack.StackError:
            if time.monotonic() > deadline:
                raise


def wait_paused(worker: Worker, timeout: float = 240.0) -> bool:
    return wait_until(worker.stopped, worker, timeout, poll=0.05)


def restart_at_pause(point: str, what: str, service: str, **how: object) -> Monitor:
    """A monitor: once the worker stopped itself at ``point``, restart ``service``, then let it go on."""

    def monitor(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}commit never reached {point}"
        try:
            note = restart(service, **how)
        finally:
            w.resume()
        return f"{what} at {point}{note}"

    return monitor


def terminate_backends(ctx: Context, appname: str) -> int:
    with ctx.pg() as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (appname,))
        n = len(cur.fetchall())
    conn.close()
    return n
