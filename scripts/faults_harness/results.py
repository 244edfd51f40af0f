"""What a trial leaves: its tasks' tries, its runs' outcomes, its verdict, and how they are printed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from faults_harness.verify import Verdict


@dataclass
class StepLog:
    run_id: str
    step: str
    try_number: int
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.run_id}/{self.step}#{self.try_number} {'ok' if self.ok else 'FAILED'}: {self.detail}"


@dataclass
class RunOutcome:
    run_id: str
    ok: bool
    batch_id: int | None = None
    committed_now: bool | None = None
    planned_batch: int | None = None
    failed_step: str | None = None


@dataclass
class TrialResult:
    kind: str
    index: int
    mode: str
    verdict: Verdict | None
    fault: str
    fired: bool
    steps: list[StepLog]
    error: str | None = None
    seconds: float = 0.0
    directory: Path | None = None

    @property
    def lost(self) -> int:
        return self.verdict.lost if self.verdict else 0

    @property
    def duplicated(self) -> int:
        return self.verdict.duplicated if self.verdict else 0

    @property
    def torn(self) -> int | None:
        return self.verdict.torn if self.verdict else None

    @property
    def differing(self) -> int | None:
        return self.verdict.differing if self.verdict else None

    @property
    def ok(self) -> bool:
        return self.error is None and self.verdict is not None and self.verdict.ok


def kinds_of(kind: str) -> list[str]:
    """A trial's kind is one fault kind, or a chain 'k1+k2+...' of chainable kinds injected into
    successive tries of one batch (one Spark run serves several faults: what CI uses)."""
    return kind.split("+")


def summarize(results: list[TrialResult], kinds: list[str]) -> tuple[list[str], bool]:
    lines, ok = [], True
    for kind in dict.fromkeys(k for chain in kinds for k in kinds_of(chain)):
        mine = [r for r in results if kind in kinds_of(r.kind)]
        lost = sum(r.lost for r in mine)
        dup = sum(r.duplicated for r in mine)
        failed = sum(1 for r in mine if not r.ok)
        fired = sum(1 for r in mine if r.fired)
        torn = [r.torn for r in mine if r.torn is not None]
        differing = [r.differing for r in mine if r.differing is not None]
        ok = ok and not lost and not dup and not failed and not sum(torn) and not sum(differing)
        lines.append(
            f"{kind}: trials {len(mine)}, lost {lost}, duplicated {dup}"
            + (f", torn batches {sum(torn)}" if torn else "")
            + (f", mirror rows differing {sum(differing)}" if differing else "")
            + f" (failed {failed}, faults fired {fired}/{len(mine)})"
        )
    return lines, ok


def describe(result: TrialResult) -> str:
    head = (
        f"[{result.kind} #{result.index + 1}] {'ok' if result.ok else 'FAILED'} in {result.seconds:.0f}s, "
        f"recovery {result.mode}: {result.fault}"
    )
    body = []
    if result.verdict:
        body.append(f"  verify: {result.verdict.summary()}")
        body += [f"  problem: {p}" for p in result.verdict.problems]
        body += [f"  note: {n}" for n in result.verdict.notes]
    if result.error:
        body += [f"  error: {line}" for line in result.error.splitlines()]
    failed_steps = [s for s in result.steps if not s.ok]
    body += [f"  failed try: {s}" for s in failed_steps]
    return "\n".join([head, *body])
