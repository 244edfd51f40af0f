"""The one exception type the devstack raises for anything the user must fix."""

from __future__ import annotations


class StackError(RuntimeError):
    """A clear, user-facing failure of the local development stack."""
