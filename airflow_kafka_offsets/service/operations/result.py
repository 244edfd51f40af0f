"""What every manual operation returns, and the first line its text shares with the others."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OperationResult:
    """The same ``data`` (for JSON and XCom) and ``text`` (for a terminal or a task log) whoever called."""

    data: dict[str, Any]
    text: str


def dry_run_heading(nothing: str = "changed") -> str:
    return f"dry run, nothing {nothing} (turn dry run off, or add --execute, to apply)"


def change_heading(applied: str | None, dry_run: bool) -> str:
    """The first line of a change's text: what was applied, else a dry run's or "nothing to change"."""
    if applied is not None:
        return applied
    return dry_run_heading() if dry_run else "nothing to change"
