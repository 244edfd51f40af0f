"""A Spark Connect server on loopback, run from the pyspark wheel (its jars include spark-connect).

``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` with the Kafka
connector and S3A jars the stack caches, ``local[2]``, bound to 127.0.0.1 on a free port. Clients
authenticate with a token generated per stack (``<state>/spark-connect/token``, 0600), handed to
the server in its environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``), never on its command line.

The default server runs the worker's pyspark (connection ``spark_connect_default``). A server of
another Spark line runs from that line's home (``spark_lines.spark_home``) with that line's jars,
in ``<state>/spark-connect-<version>`` (connection ``spark_connect_<version with underscores>``),
so servers of several lines run side by side. Spark 4.0+ homes ship the server's jar; 3.5's do not.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from . import jars, procs, spark_lines, state
from .errors import StackError

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
MASTER = os.environ.get("AKO_SPARK_CONNECT_MASTER", "local[2]")
DRIVER_MEMORY = os.environ.get("AKO_SPARK_CONNECT_MEMORY", "1g")
# pyspark's client sends a token without TLS only to "localhost" (gRPC local credentials)
CLIENT_HOST = "localhost"


DEFAULT_CONN_ID = "spark_connect_default"  # SparkConnectHook's default connection


def conn_id(spark_version: str | None = None) -> str:
    """The Airflow connection id of the default server (``None``) or of one Spark release's server."""
    return DEFAULT_CONN_ID if spark_version is None else f"spark_connect_{spark_version.replace('.', '_')}"


def base_dir(sd: Path, spark_version: str | None = None) -> Path:
    """Where a server keeps its token, log and scratch space: one dir per server."""
    return sd / ("spark-connect" if spark_version is None else f"spark-connect-{spark_version}")


def configure(
    sd: Path,
    connector_jars: list[str],
    s3a_jars: list[str],
    spark_home: Path | None = None,
    spark_version: str | None = None,
) -> dict[str, Any]:
    """Pick the port and dirs, write the token; return the config record.

    ``spark_home``/``spark_version``: a line's home and release (default: the worker's pyspark).
    """
    home = spark_home or jars.pyspark_home()
    if home is None or not any((home / "jars").glob("spark-connect_*.jar")):
        where = f"the Spark {spark_version} home {home}" if spark_version else f"this Python ({sys.executable})"
        raise StackError(
            f"no jars/spark-connect_*.jar in {where}: it cannot run a Spark Connect server "
            "(pyspark 4.0 and newer ship it)"
        )
    base = base_dir(sd, spark_version)
    if base.exists():
        shutil.rmtree(base)
    (base / "local").mkdir(parents=True)
    token_file = base / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(24))
    cfg: dict[str, Any] = {
        "spark_home": str(home),
        "base_dir": str(base),
        "host": state.LOOPBACK,
        "port": procs.free_port(),
        "token_file": str(token_file),
        "jars": [*connector_jars, *s3a_jars],
        "log": str(base / "server.out"),
    }
    if spark_version is not None:  # the default's record stays as it was
        cfg.update({"spark_version": spark_version, "conn_id": conn_id(spark_version)})
    return cfg


def _marker(cfg: dict[str, Any]) -> str:
    return f"-Dako.connect.dir={cfg['base_dir']}"


def token(cfg: dict[str, Any]) -> str:
    return Path(cfg["token_file"]).read_text().strip()


def server_argv(cfg: dict[str, Any]) -> list[str]:
    """The server's command: its home's spark-submit running the server class (no sbin/ script needed),
    the connector and S3A jars, the binding address and port (docs/spark.md shows the same form)."""
    conf = {
        "spark.master": MASTER,
        "spark.connect.grpc.binding.address": cfg["host"],
        "spark.connect.grpc.binding.port": str(cfg["port"]),
        "spark.local.dir": f"{cfg['base_dir']}/local",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": _marker(cfg),
        "spark.log.level": "WARN",
    }
    argv = [f"{cfg['spark_home']}/bin/spark-submit", "--class", SERVER_CLASS, "--name", "Spark Connect server"]
    argv += ["--driver-memory", DRIVER_MEMORY, "--jars", ",".join(cfg["jars"])]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv


def start(cfg: dict[str, Any], timeout: float = 120) -> int:
    """Start the server and wait until its port answers; returns its pid."""
    procs.require_tool("java", "install a JDK 17, e.g. apt-get install openjdk-17-jre-headless")
    procs.ensure_port_free(cfg["port"], "Spark Connect server", wait_s=10)
    # a JVM server, whatever pyspark client runs in this process (its Connect mark is inherited otherwise)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    if cfg.get("spark_version"):
        env = spark_lines.submit_env(Path(cfg["spark_home"]), env)  # its conf/spark-env.sh: its pyspark
    env.update(
        {
            "SPARK_HOME": cfg["spark_home"],
            "SPARK_LOCAL_IP": state.LOOPBACK,
            "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
            TOKEN_ENV: token(cfg),
        }
    )
    pid = procs.spawn_detached(server_argv(cfg), Path(cfg["log"]), cwd=Path(cfg["base_dir"]), env=env)
    deadline = time.monotonic() + timeout
    while not procs.port_open(cfg["port"], cfg["host"]):
        if not procs.pid_alive(pid):
            tail = procs.tail(cfg["log"])
            raise StackError(f"Spark Connect server (pid {pid}) exited; tail of {cfg['log']}:\n{tail}")
        if time.monotonic() > deadline:
            raise StackError(f"Spark Connect server did not listen within {timeout:.0f}s; see {cfg['log']}")
        time.sleep(0.3)
    return pid


def stop(cfg: dict[str, Any], hard: bool = False) -> None:
    """SIGTERM (``hard``: SIGKILL, a crash) the server by pid."""
    procs.terminate(cfg.get("pid"), marker=_marker(cfg), timeout=20, kill=hard)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), _marker(cfg))


def connection(cfg: dict[str, Any]) -> dict[str, Any]:
    """The server as an Airflow connection of the Spark provider's ``spark_connect`` type (holds the token)."""
    return {"conn_type": "spark_connect", "host": CLIENT_HOST, "port": cfg["port"], "password": token(cfg)}
