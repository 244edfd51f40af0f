"""What the devstack tells its user: progress lines on stderr, and the one exception it raises for
anything the user must fix."""

from __future__ import annotations

import sys


class StackError(RuntimeError):
    """A clear, user-facing failure of the local development stack."""


def say(msg: str) -> None:
    print(f"devstack: {msg}", file=sys.stderr, flush=True)
