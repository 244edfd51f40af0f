"""One injected fault: which task it hits, the environment of that try, what the harness does meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from faults_harness.context import MISSED
from faults_harness.worker import PAUSE_ENV

if TYPE_CHECKING:
    from faults_harness.pipeline import Pipeline
    from faults_harness.procs import Worker

Monitor = Callable[["Pipeline", "Worker"], str]


@dataclass
class Fault:
    """One injected fault: which task it hits, the env of that try, what the harness does meanwhile."""

    step: str
    env: dict[str, str] = field(default_factory=dict)
    monitor: Monitor | None = None
    description: str = ""
    fired: bool = False
    outcome: str = ""
    after: Callable[[], None] | None = None  # once the faulted try has ended (late records, successors...)


def in_one_task(faults: list[Fault]) -> Fault:
    """A kind's faults for the one-task form: they hit the same try of the ``batch`` task, in the order
    their steps run in it (s3_restart's read fault, then its commit fault)."""
    if len(faults) == 1:
        (fault,) = faults
        fault.step = "batch"
        return fault
    env: dict[str, str] = {}
    for fault in faults:
        for name, value in fault.env.items():
            env[name] = f"{env[name]},{value}" if name == PAUSE_ENV and name in env else value
    monitors = [f.monitor for f in faults if f.monitor is not None]
    afters = [f.after for f in faults if f.after is not None]

    def monitor(p: Pipeline, w: Worker) -> str:
        said = [m(p, w) for m in monitors]
        missed = any(s.startswith(MISSED) for s in said)
        return (MISSED if missed else "") + "; then ".join(said)

    def after() -> None:
        for step in afters:
            step()

    return Fault(
        "batch",
        env,
        monitor if monitors else None,
        "; then ".join(f.description for f in faults),
        after=after if afters else None,
    )
