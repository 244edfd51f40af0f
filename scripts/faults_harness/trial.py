"""One trial: produce waves of records with unique ids, run a batch per wave as DAG runs of worker
processes, inject one fault (or a chain) into one of them, recover the way Airflow would, verify
exactly-once.

Recovery is either a task retry (``retry``: the faulted task is tried again and the run goes on) or
the next scheduled run (``next_run``: the faulted run has no retries left and fails; a fresh run
starts from its first task).
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable

import devstack
from faults_harness.context import MISSED, MODES, Context, TrialError
from faults_harness.driver import RETRIES, run_dag, run_until_success
from faults_harness.fault import Fault
from faults_harness.kinds import KINDS, faults_of
from faults_harness.pipeline import Pipeline
from faults_harness.procs import group_members, kill_everything_started, kill_leftovers
from faults_harness.results import RunOutcome, TrialResult, kinds_of
from faults_harness.verify import verify


def concurrent_runs(pipe: Pipeline, prefix: str) -> str:
    """A scheduled run and a manual one started at the same moment on the same pipeline."""
    outcomes: dict[str, RunOutcome | BaseException] = {}
    barrier = threading.Barrier(2)

    def go(name: str) -> None:
        barrier.wait()
        try:
            outcomes[name] = run_until_success(pipe, f"{prefix}-{name}")
        except BaseException as exc:  # reported below
            outcomes[name] = exc

    threads = [threading.Thread(target=go, args=(n,)) for n in ("scheduled", "manual")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = {n: o for n, o in outcomes.items() if isinstance(o, BaseException)}
    if failed:
        raise TrialError("; ".join(f"{n}: {o}" for n, o in failed.items()))
    done = {n: o for n, o in outcomes.items() if isinstance(o, RunOutcome)}  # all of them
    ledger = pipe.ctx.ledger()
    with ledger.transaction() as tx:
        events = tx.fetchall(
            "SELECT batch_id, event, count(*) FROM {s}.audit WHERE pipeline = %s"
            " AND event IN ('planned', 'committed') GROUP BY batch_id, event",
            (pipe.name,),
        )
    twice = [f"batch {b} {e} {n} times" for b, e, n in events if n != 1]
    if twice:
        raise TrialError("concurrent runs: " + ", ".join(twice))
    summary = ", ".join(
        f"{n}: planned {o.planned_batch} committed_now={o.committed_now}" for n, o in sorted(done.items())
    )
    return f"two runs started together ({summary})"


def choose_mode(ctx: Context, kind_index: int, trial: int, rng: random.Random) -> str:
    if ctx.recovery in MODES:
        return ctx.recovery
    return MODES[(kind_index + trial) % 2]


def run_trial(ctx: Context, kind: str, index: int, seed: int) -> TrialResult:  # noqa: C901 - one trial, in order
    rng = random.Random(f"{seed}:{kind}:{index}")
    parts = kinds_of(kind)
    chained = len(parts) > 1
    if chained or kind in ("concurrent_runs", "stale_worker"):
        mode = "retry" if chained else "n/a"
    else:
        mode = choose_mode(ctx, list(KINDS).index(kind), index, rng)
    started = time.monotonic()
    pipe: Pipeline | None = None
    faults: list[Fault] = []
    description = ""
    try:
        pipe = Pipeline(ctx, f"chain{len(parts)}" if chained else kind, index, rng)
        fault_wave = rng.randrange(max(1, ctx.batches - 1))
        for wave in range(ctx.batches):
            pipe.random_wave(f"w{wave}-")
            prefix = f"w{wave}"
            if wave != fault_wave:
                run_until_success(pipe, prefix)
                continue
            if kind == "concurrent_runs":
                description = concurrent_runs(pipe, prefix)
                continue
            faults = [f for k in parts for f in faults_of(k, pipe)]
            if wave < ctx.batches - 1:
                previous = faults[0].after

                def produce_late(prev: Callable[[], None] | None = previous, tag: str = f"w{wave}late-") -> None:
                    if prev:
                        prev()
                    pipe.random_wave(tag)  # newer records the replay must leave to the next batch

                faults[0].after = produce_late
            first = run_dag(pipe, f"{prefix}-run1", retries=0 if mode == "next_run" else RETRIES, faults=faults)
            if not first.ok:
                run_until_success(pipe, prefix, first_run=2, faults=faults)
            description = "; then ".join(f"{f.description}: {f.outcome}" for f in faults)
        _reap_orphans(pipe)
        verdict = verify(ctx.ledger(), pipe.name, pipe.output_root, pipe.produced)
        error = None
    except Exception as exc:  # TrialError: stuck; anything else: a harness or stack problem
        verdict = None
        error = str(exc) if isinstance(exc, TrialError) else "".join(traceback.format_exception(exc)).rstrip()
        kill_everything_started()
        try:
            devstack.up()  # a restart may have left a service down
        except devstack.StackError as up_exc:
            error += f"\n(the stack is not up: {up_exc})"
        if pipe is not None:
            _reap_orphans(pipe)
            try:
                verdict = verify(ctx.ledger(), pipe.name, pipe.output_root, pipe.produced)
            except Exception as vexc:  # report the trial's own error first
                error += f"\n(verification failed too: {vexc})"
    fired = kind == "concurrent_runs" or (
        bool(faults) and all(f.fired and not f.outcome.startswith(MISSED) for f in faults)
    )
    return TrialResult(
        kind,
        index,
        mode,
        verdict,
        description or "; ".join(f.description for f in faults),
        fired,
        pipe.steps if pipe else [],
        error,
        time.monotonic() - started,
        pipe.dir if pipe else None,
    )


def _reap_orphans(pipe: Pipeline, timeout: float = 120.0) -> None:
    """Let orphaned Spark jobs finish (they must not matter), then make sure they are gone."""
    for pgid in pipe.orphans:
        deadline = time.monotonic() + timeout
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        kill_leftovers(pgid)
