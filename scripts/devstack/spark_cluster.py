"""A Spark standalone master + one worker on loopback, run from the pyspark wheel."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import jars, procs, state
from .errors import StackError

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKER_CORES = os.environ.get("AKO_SPARK_WORKER_CORES", "2")
WORKER_MEMORY = os.environ.get("AKO_SPARK_WORKER_MEMORY", "2g")


def configure(sd: Path) -> dict[str, Any]:
    """Pick ports and dirs; return the config record."""
    home = jars.pyspark_home()
    if home is None:
        raise StackError(
            "pyspark (with its jars/) is not installed in this Python "
            f"({sys.executable}); cannot run a Spark standalone cluster"
        )
    if not (home / "bin" / "spark-class").exists():
        raise StackError(f"{home}/bin/spark-class not found; is this a full pyspark install?")
    base = sd / "spark"
    if base.exists():
        shutil.rmtree(base)
    for sub in ("work", "conf", "logs"):
        (base / sub).mkdir(parents=True)
    mport, mweb, wport, wweb = procs.free_ports(4)
    return {
        "spark_home": str(home),
        "base_dir": str(base),
        "host": state.LOOPBACK,
        "master_port": mport,
        "master_webui_port": mweb,
        "worker_port": wport,
        "worker_webui_port": wweb,
        "master_url": f"spark://{state.LOOPBACK}:{mport}",
        "master_log": str(base / "logs" / "master.out"),
        "worker_log": str(base / "logs" / "worker.out"),
    }


def _env(cfg: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": cfg["spark_home"],
            "SPARK_LOCAL_IP": state.LOOPBACK,  # also makes the web UIs bind to loopback
            "SPARK_CONF_DIR": f"{cfg['base_dir']}/conf",
            "SPARK_LOG_DIR": f"{cfg['base_dir']}/logs",
            "SPARK_WORKER_DIR": f"{cfg['base_dir']}/work",
            "SPARK_DAEMON_JAVA_OPTS": f"-Dako.stack.dir={cfg['base_dir']}",
            # the REST submission server would take the fixed port 6066; nothing here needs it
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
        }
    )
    return env


def _marker(cfg: dict[str, Any]) -> str:
    return f"-Dako.stack.dir={cfg['base_dir']}"


def start(cfg: dict[str, Any], timeout: float = 90) -> dict[str, Any]:
    """Start master then worker (each only if not running); wait for an ALIVE worker."""
    procs.require_tool("java", "install a JDK 17, e.g. apt-get install openjdk-17-jre-headless")
    spark_class = f"{cfg['spark_home']}/bin/spark-class"
    env, cwd, h = _env(cfg), Path(cfg["base_dir"]), state.LOOPBACK
    if not procs.pid_alive(cfg.get("master_pid"), _marker(cfg)):
        procs.ensure_port_free(cfg["master_port"], "Spark master")
        cfg["master_pid"] = procs.spawn_detached(
            [
                spark_class,
                MASTER_CLASS,
                "--host",
                h,
                "--port",
                str(cfg["master_port"]),
                "--webui-port",
                str(cfg["master_webui_port"]),
            ],
            Path(cfg["master_log"]),
            cwd=cwd,
            env=env,
        )
        _wait(lambda: _master_json(cfg) is not None, cfg["master_pid"], cfg["master_log"], "Spark master", timeout)
    if not procs.pid_alive(cfg.get("worker_pid"), _marker(cfg)):
        procs.ensure_port_free(cfg["worker_port"], "Spark worker")
        cfg["worker_pid"] = procs.spawn_detached(
            [
                spark_class,
                WORKER_CLASS,
                "--host",
                h,
                "--port",
                str(cfg["worker_port"]),
                "--webui-port",
                str(cfg["worker_webui_port"]),
                "--cores",
                WORKER_CORES,
                "--memory",
                WORKER_MEMORY,
                "--work-dir",
                f"{cfg['base_dir']}/work",
                cfg["master_url"],
            ],
            Path(cfg["worker_log"]),
            cwd=cwd,
            env=env,
        )
    _wait(lambda: alive_workers(cfg) > 0, cfg["worker_pid"], cfg["worker_log"], "Spark worker registration", timeout)
    return cfg


def stop(cfg: dict[str, Any]) -> None:
    """Stop worker, then master (SIGTERM, SIGKILL after a timeout)."""
    procs.terminate(cfg.get("worker_pid"), marker=_marker(cfg), timeout=20)
    procs.terminate(cfg.get("master_pid"), marker=_marker(cfg), timeout=20)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("master_pid"), _marker(cfg)) and procs.pid_alive(cfg.get("worker_pid"), _marker(cfg))


def alive_workers(cfg: dict[str, Any]) -> int:
    """Number of ALIVE workers the master reports (0 if it does not answer)."""
    info = _master_json(cfg)
    if not info:
        return 0
    return sum(1 for w in info.get("workers", []) if w.get("state") == "ALIVE")


def _master_json(cfg: dict[str, Any]) -> dict[str, Any] | None:
    url = f"http://{state.LOOPBACK}:{cfg['master_webui_port']}/json/"
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        with opener.open(url, timeout=3) as resp:
            master: dict[str, Any] = json.load(resp)
            return master
    except (OSError, ValueError):
        return None


def _wait(cond: Callable[[], bool], pid: int, log: str, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if not procs.pid_alive(pid):
            raise StackError(f"{what} failed: process {pid} exited; tail of {log}:\n{procs.tail(log)}")
        time.sleep(0.5)
    raise StackError(f"{what} timed out after {timeout:.0f}s; tail of {log}:\n{procs.tail(log)}")
