"""Where the stack lives on disk: state dir, jar cache, stack.json, the up/down lock."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import StackError

STATE_ENV = "AKO_STACK_DIR"
CACHE_ENV = "AKO_CACHE_DIR"
STACK_FILE = "stack.json"
PASSWORD_FILE = "pg-password"
LOOPBACK = "127.0.0.1"


def state_dir() -> Path:
    """``$AKO_STACK_DIR`` or ``/tmp/ako-stack-<uid>``."""
    return Path(os.environ.get(STATE_ENV) or f"/tmp/ako-stack-{os.getuid()}").absolute()


def cache_dir() -> Path:
    """``$AKO_CACHE_DIR`` or ``~/.cache/airflow-kafka-offsets`` (jars live here, not in the work tree)."""
    default = Path.home() / ".cache" / "airflow-kafka-offsets"
    return Path(os.environ.get(CACHE_ENV) or default).absolute()


def ensure_state_dir() -> Path:
    """Create the state dir; 0755 so the ``postgres`` user can reach its own subdir."""
    sd = state_dir()
    sd.mkdir(parents=True, exist_ok=True)
    os.chmod(sd, 0o755)
    return sd


def load() -> dict[str, Any]:
    """The recorded stack (``{}`` when nothing was started)."""
    path = state_dir() / STACK_FILE
    if not path.exists():
        return {}
    stack: dict[str, Any] = json.loads(path.read_text())
    return stack


def save(stack: dict[str, Any]) -> None:
    """Atomically write ``stack.json`` (it never holds the password, only its file path)."""
    sd = ensure_state_dir()
    tmp = sd / (STACK_FILE + ".tmp")
    tmp.write_text(json.dumps(stack, indent=2, sort_keys=True) + "\n")
    tmp.replace(sd / STACK_FILE)


@contextlib.contextmanager
def lock() -> Iterator[None]:
    """Serialise up/down/restart across processes (e.g. pytest-xdist workers).

    The lock file sits beside the state dir, not in it, so ``down`` can delete the
    state dir while still holding the lock.
    """
    with _lock_beside(state_dir()):
        yield


@contextlib.contextmanager
def cache_lock(dest: Path) -> Iterator[None]:
    """Serialise fetches or installs of one cached set (the cache is shared by every stack of the
    user, and by pytest-xdist workers): a lock file beside it."""
    with _lock_beside(dest):
        yield


@contextlib.contextmanager
def _lock_beside(path: Path) -> Iterator[None]:
    """An exclusive lock on ``<path>.lock``, held while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def require() -> dict[str, Any]:
    """The recorded stack, which must be up (PostgreSQL and Kafka at least)."""
    stack = load()
    if not stack.get("postgres") or not stack.get("kafka"):
        raise StackError(f"the stack is not up (no {state_dir() / STACK_FILE}); run `scripts/stack up`")
    return stack
