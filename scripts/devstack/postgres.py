"""A throwaway PostgreSQL 15 cluster: initdb, start, stop, and the ``ledger`` database."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from . import procs, state
from .errors import StackError

PG_BIN_ENV = "AKO_PG_BIN"
DEFAULT_PG_BIN = "/usr/lib/postgresql/15/bin"
SUPERUSER = "ako"
DATABASE = "ledger"
OS_USER = "postgres"  # who owns the cluster when we run as root (initdb refuses root)


def pg_bin() -> Path:
    """Directory of initdb/pg_ctl: ``$AKO_PG_BIN`` or the Debian PostgreSQL 15 one."""
    path = Path(os.environ.get(PG_BIN_ENV) or DEFAULT_PG_BIN)
    if not (path / "initdb").exists():
        raise StackError(
            f"PostgreSQL 15 server binaries not found in {path} (apt-get install postgresql-15, or set {PG_BIN_ENV})"
        )
    return path


def _as_owner(argv: list[str]) -> list[str]:
    """Run as ``postgres`` via runuser when we are root; unchanged otherwise."""
    if os.geteuid() != 0:
        return argv
    return [procs.require_tool("runuser", "util-linux"), "-u", OS_USER, "--", *argv]


def _chown_owner(path: Path) -> None:
    if os.geteuid() == 0:
        pw = pwd.getpwnam(OS_USER)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def password(sd: Path) -> str:
    """The superuser password, generated once per state dir and kept 0600."""
    path = sd / state.PASSWORD_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(24) + "\n")
    return path.read_text().strip()


def _layout(sd: Path) -> dict[str, str]:
    base = sd / "postgres"
    return {
        "base_dir": str(base),
        "data_dir": str(base / "data"),
        "socket_dir": str(base / "sock"),
        "log": str(base / "postgres.log"),
    }


def initdb(sd: Path, port: int) -> dict[str, Any]:
    """Create the cluster (owned by ``postgres`` when root); return its config record."""
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            raise StackError(f"running as root needs an OS user {OS_USER!r} to own the cluster") from None
    cfg: dict[str, Any] = {
        "host": state.LOOPBACK,
        "port": port,
        "user": SUPERUSER,
        "database": DATABASE,
        "password_file": str(sd / state.PASSWORD_FILE),
        **_layout(sd),
    }
    base, data, sock = (Path(cfg[k]) for k in ("base_dir", "data_dir", "socket_dir"))
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(mode=0o700)
    sock.mkdir(mode=0o700)
    for p in (base, sock):
        _chown_owner(p)
    pwfile = base / "initdb.pw"  # readable by the cluster owner only, deleted right after
    pwfile.write_text(password(sd) + "\n")
    os.chmod(pwfile, 0o600)
    _chown_owner(pwfile)
    try:
        procs.run(
            _as_owner(
                [
                    str(pg_bin() / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    SUPERUSER,
                    f"--pwfile={pwfile}",
                    "--auth-local=scram-sha-256",
                    "--auth-host=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "--no-instructions",
                ]
            ),
            "initdb",
            cwd=base,
            timeout=300,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    (data / "pg_hba.conf").write_text(
        "# devstack: password (SCRAM) auth only, loopback TCP + the private socket dir\n"
        "local all all scram-sha-256\n"
        f"host  all all {state.LOOPBACK}/32 scram-sha-256\n"
    )
    with open(data / "postgresql.conf", "a") as fh:
        fh.write(
            "\n# --- devstack ---\n"
            f"listen_addresses = '{state.LOOPBACK}'\n"
            f"port = {port}\n"
            f"unix_socket_directories = '{sock}'\n"
            "password_encryption = 'scram-sha-256'\n"
            "fsync = off                 # throwaway cluster: no OS-crash durability\n"
            "full_page_writes = off\n"
            "max_connections = 200\n"
            "wal_level = logical         # the CDC source (Debezium, scripts/stack up --cdc) decodes the WAL\n"
            "log_min_messages = warning\n"
        )
    return cfg


def start(cfg: dict[str, Any], timeout: int = 60) -> int:
    """``pg_ctl start -w``; return the postmaster pid."""
    procs.ensure_port_free(cfg["port"], "PostgreSQL")
    procs.run(
        _as_owner(
            [str(pg_bin() / "pg_ctl"), "-D", cfg["data_dir"], "-l", cfg["log"], "-w", "-t", str(timeout), "start"]
        ),
        "pg_ctl start",
        cwd=cfg["base_dir"],
        timeout=timeout + 30,
    )
    pid = postmaster_pid(cfg)
    if pid is None:
        raise StackError(f"PostgreSQL started but left no postmaster.pid:\n{procs.tail(cfg['log'])}")
    return pid


def stop(cfg: dict[str, Any], mode: str = "fast", timeout: int = 60) -> None:
    """``pg_ctl stop -m <mode>`` (smart|fast|immediate); falls back to killing the pid."""
    pid = cfg.get("pid")
    if not is_running(cfg):
        return
    try:
        procs.run(
            _as_owner([str(pg_bin() / "pg_ctl"), "-D", cfg["data_dir"], "-m", mode, "-w", "-t", str(timeout), "stop"]),
            "pg_ctl stop",
            cwd=cfg["base_dir"],
            timeout=timeout + 30,
        )
    except StackError:
        procs.terminate(pid, marker=cfg["data_dir"], timeout=10)


def postmaster_pid(cfg: dict[str, Any]) -> int | None:
    try:
        return int((Path(cfg["data_dir"]) / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def is_running(cfg: dict[str, Any]) -> bool:
    """The recorded postmaster is alive (pid matches this data dir)."""
    return procs.pid_alive(cfg.get("pid"), marker=cfg["data_dir"])


def connect(cfg: dict[str, Any], dbname: str | None = None, timeout: int = 5) -> Any:
    """psycopg2 connection over TCP with the superuser password."""
    try:
        import psycopg2
    except ImportError as exc:
        raise StackError("psycopg2 is not installed in this Python (pip install psycopg2-binary)") from exc
    return psycopg2.connect(
        host=cfg["host"],
        port=cfg["port"],
        user=cfg["user"],
        password=Path(cfg["password_file"]).read_text().strip(),
        dbname=dbname or cfg["database"],
        connect_timeout=timeout,
    )


def ready(cfg: dict[str, Any]) -> bool:
    """Liveness probe: the server accepts an authenticated connection."""
    try:
        conn = connect(cfg, dbname="postgres", timeout=3)
    except Exception:  # any failure means "not ready"
        return False
    conn.close()
    return True


def ensure_database(cfg: dict[str, Any], dbname: str | None = None) -> None:
    """Create the ``ledger`` database (or ``dbname``) if it does not exist yet."""
    dbname = dbname or cfg["database"]
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = connect(cfg, dbname="postgres")
            break
        except StackError:
            raise
        except Exception as exc:
            if time.monotonic() > deadline:
                raise StackError(
                    f"cannot connect to PostgreSQL on {cfg['host']}:{cfg['port']}: {exc}\n{procs.tail(cfg['log'])}"
                ) from exc
            time.sleep(0.5)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{dbname}"')
    finally:
        conn.close()
