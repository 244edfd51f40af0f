"""Process and port helpers: spawn detached, probe, stop by pid, pick free ports."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .errors import StackError

# Popen objects of children spawned by this interpreter, kept so they are not
# garbage-collected while running (ResourceWarning) and can be reaped.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def require_tool(name: str, hint: str = "") -> str:
    """Absolute path of ``name`` on PATH, or a StackError saying it is missing."""
    path = shutil.which(name)
    if not path:
        raise StackError(f"{name} not found on PATH" + (f" ({hint})" if hint else ""))
    return path


def tail(path: Path | str, lines: int = 40) -> str:
    """Last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run(
    argv: Sequence[str],
    what: str,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion; on failure raise ``<what> failed: <output tail>``."""
    try:
        proc = subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError as exc:
        raise StackError(f"{what} failed: {exc.filename} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"{what} timed out after {timeout:.0f}s") from exc
    if proc.returncode != 0:
        out = "\n".join((proc.stderr + "\n" + proc.stdout).strip().splitlines()[-25:])
        raise StackError(f"{what} failed (exit {proc.returncode}):\n{out}")
    return proc


def spawn_detached(argv: Sequence[str], log_path: Path, *, cwd: Path, env: Mapping[str, str] | None = None) -> int:
    """Start a long-running server in its own session, output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def _reap(pid: int) -> None:
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        del _CHILDREN[pid]


def cmdline(pid: int) -> str:
    """The process's command line, args joined by spaces ('' if unknown)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def pid_alive(pid: int | None, marker: str | None = None) -> bool:
    """True if ``pid`` runs (not a zombie) and, if given, its cmdline contains ``marker``.

    The marker guards against a recycled pid that now belongs to someone else.
    """
    if not pid:
        return False
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user (e.g. postgres when we are not root)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
    except (OSError, IndexError):
        return False
    return marker is None or marker in cmdline(pid)


def terminate(pid: int | None, marker: str | None = None, timeout: float = 30.0, kill: bool = False) -> bool:
    """SIGTERM ``pid`` (its process group when it leads one), SIGKILL after ``timeout``.

    ``kill=True`` sends SIGKILL straight away (crash simulation). Only touches the
    process if it is alive and matches ``marker``. Returns True if it was stopped.
    """
    if not pid_alive(pid, marker):
        return False
    assert pid is not None
    steps = [(signal.SIGKILL, 10.0)]
    if not kill:
        steps.insert(0, (signal.SIGTERM, timeout))
    for sig, wait in steps:
        _signal(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return True
            time.sleep(0.2)
    raise StackError(f"process {pid} did not exit after SIGKILL")


def _signal(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:  # we started it as a session/group leader
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def free_port(host: str = "127.0.0.1") -> int:
    """An unused TCP port on ``host`` (asked from the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct unused ports."""
    ports: list[int] = []
    while len(ports) < n:
        p = free_port(host)
        if p not in ports:
            ports.append(p)
    return ports


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_port_free(port: int, what: str, host: str = "127.0.0.1", wait_s: float = 0) -> None:
    """Raise a clear error if a foreign process holds a port we recorded earlier (after ``wait_s``:
    a process we just killed may take a moment to let its ports go)."""
    deadline = time.monotonic() + wait_s
    while port_open(port, host) and time.monotonic() < deadline:
        time.sleep(0.2)
    if port_open(port, host):
        raise StackError(
            f"{what}: port {host}:{port} is already taken by another process; "
            f"run `scripts/stack down` to start fresh with new ports"
        )


def rss_bytes(pid: int | None, marker: str) -> int | None:
    """A running server's resident memory (None when it does not run)."""
    if not pid_alive(pid, marker=marker):
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def wait_answering(what: str, pid: int, answers: Callable[[], bool], log: str, timeout: float, every: float) -> None:
    """Poll ``answers`` until it is true; raise with the log's tail if the process dies or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not answers():
        if not pid_alive(pid):
            raise StackError(f"{what} (pid {pid}) exited; tail of {log}:\n{tail(log)}")
        if time.monotonic() > deadline:
            raise StackError(f"{what} did not answer within {timeout:.0f}s; tail of {log}:\n{tail(log)}")
        time.sleep(every)
