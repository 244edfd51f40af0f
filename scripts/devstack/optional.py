"""The optional services on a running stack, started and stopped on their own: the Spark standalone
cluster, Spark Connect servers (the default one and one per Spark line) and Airflow."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from . import airflow, cdc, ensure, info, spark_connect, state, toxiproxy
from . import spark_cluster as spark
from .errors import StackError, say
from .stack import restart


def start_cdc() -> dict[str, Any]:
    """Start (or reuse) the CDC source of the running stack (Kafka Connect with Debezium); its config record
    (``database``: the source database, ``topic_prefix``, ``start_s``: how long its start took)."""
    with state.lock():
        stack = state.require()
        stack["cdc"] = cdc.ensure(Path(stack["state_dir"]), stack)
        state.save(stack)
        return dict(stack["cdc"])


def start_toxiproxy() -> toxiproxy.Proxied:
    """Start (or reuse) toxiproxy in front of the running stack's services, with a proxy for each that runs
    (start the Spark Connect server first to get its proxy); returns its API and the Airflow connections
    through the proxies (:func:`devstack.toxiproxy.connections`). Builds the server with Go on first use."""
    with state.lock():
        stack = state.require()
        if not kafka_proxied(stack):
            raise StackError("this stack's broker has no PROXIED listener: run `scripts/stack up` (it adds one)")
        cfg = stack.get("toxiproxy")
        if not (cfg and toxiproxy.is_running(cfg) and toxiproxy.answers(cfg)):
            if cfg:
                toxiproxy.stop(cfg)
            else:
                cfg = toxiproxy.configure(Path(stack["state_dir"]))
            say(f"starting toxiproxy {cfg['version']} on {toxiproxy.url(cfg)}")
            stack["toxiproxy"] = cfg
            state.save(stack)  # the record first: `down` finds a server whose start failed half-way
            cfg["pid"] = toxiproxy.start(cfg)
        toxiproxy.populate(cfg, stack)
        state.save(stack)
        env = toxiproxy.connections(stack, info.from_stack(stack).airflow_env())
        return toxiproxy.Proxied(toxiproxy.url(cfg), env)


def kafka_proxied(stack: dict[str, Any]) -> bool:
    return bool(stack["kafka"].get("proxied_port"))


def stop_toxiproxy() -> None:
    """Stop toxiproxy (if any) and forget it: every proxied connection is closed."""
    with state.lock():
        stack = state.load()
        if stack.get("toxiproxy"):
            toxiproxy.stop(stack["toxiproxy"])
            shutil.rmtree(stack.pop("toxiproxy")["base_dir"], ignore_errors=True)
            state.save(stack)


def start_spark_connect(spark_version: str | None = None) -> dict[str, Any]:
    """Start (or reuse) a Spark Connect server of the running stack; returns its Airflow connection.

    ``spark_version`` (a release such as ``"4.1.2"`` or a line such as ``"4.1"``): a server of that
    Spark line, run from its home (installed if needed) with its connector and S3A jars, on its own
    port and state dir (connection id ``spark_connect.conn_id(version)``); servers of several lines
    run at once. Without it (or with the worker's own release): the default server, as always.
    """
    line = ensure.line_version(spark_version)
    with state.lock():
        stack = state.require()
        sd = Path(stack["state_dir"])
        if line is None:
            stack["spark_connect"] = ensure.connect_server(sd, stack)
            state.save(stack)
            return spark_connect.connection(stack["spark_connect"])
        try:
            cfg = ensure.connect_server_of_line(sd, stack, line)
        finally:
            state.save(stack)
        return spark_connect.connection(cfg)


def restart_spark_connect(hard: bool = False, spark_version: str | None = None) -> None:
    """Stop (``hard``: SIGKILL, a crash) and start a Connect server on the same port and token."""
    line = ensure.line_version(spark_version)
    if line is None:
        restart("spark_connect", spark_connect, hard, "run `scripts/stack up --spark-connect`")
        return
    with state.lock():
        stack = state.require()
        cfg = stack.get("spark_connect_lines", {}).get(line)
        if not cfg:
            raise StackError(
                f"this stack has no Spark {line} Connect server; "
                f"run `scripts/stack up --spark-connect --spark-version {line}`"
            )
        spark_connect.stop(cfg, hard=hard)
        cfg["pid"] = spark_connect.start(cfg)
        state.save(stack)


def stop_spark_connect(spark_version: str | None = None) -> None:
    """Stop a Spark Connect server (the default one, or that of ``spark_version``'s line) and forget it."""
    line = ensure.line_version(spark_version)
    with state.lock():
        stack = state.load()
        if line is None:
            if stack.get("spark_connect"):
                spark_connect.stop(stack["spark_connect"])
                shutil.rmtree(stack.pop("spark_connect")["base_dir"], ignore_errors=True)
                state.save(stack)
            return
        lines = stack.get("spark_connect_lines", {})
        if line in lines:
            spark_connect.stop(lines[line])
            shutil.rmtree(lines.pop(line)["base_dir"], ignore_errors=True)
            if not lines:
                stack.pop("spark_connect_lines")
            state.save(stack)


def start_spark_cluster() -> str:
    """Start (or reuse) the Spark standalone cluster of the running stack; return its URL."""
    with state.lock():
        stack = state.require()
        stack["spark"] = ensure.spark_cluster(Path(stack["state_dir"]), stack.get("spark"))
        state.save(stack)
        url: str = stack["spark"]["master_url"]
        return url


def stop_spark_cluster() -> None:
    """Stop the Spark cluster (if any) and forget it."""
    with state.lock():
        stack = state.load()
        if stack.get("spark"):
            spark.stop(stack["spark"])
            shutil.rmtree(stack["spark"]["base_dir"], ignore_errors=True)
            stack.pop("spark")
            state.save(stack)


def start_airflow(ledger_schema: str = "kafka_offsets") -> dict[str, Any]:
    """Start (or reuse) Airflow (api-server, scheduler, dag-processor, triggerer) on the running stack.

    Returns its record: ``url``, ``user``, ``password_file``, ``ledger_schema``, ``home``. A running
    deployment is reused as it is, whatever ``ledger_schema`` asks.
    """
    with state.lock():
        stack = state.require()
        af: dict[str, Any] | None = stack.get("airflow")
        if af and airflow.is_running(af):
            say(f"Airflow already running ({af['url']})")
            return af
        if af:
            airflow.stop(af)
        af = airflow.configure(Path(stack["state_dir"]), stack["postgres"], ledger_schema)
        say(f"starting Airflow {', '.join(airflow.COMPONENTS)} ({af['url']})")
        stack["airflow"] = af
        state.save(stack)
        try:
            airflow.start(af, stack["postgres"], info.from_stack(stack).airflow_env())
        finally:
            state.save(stack)  # the pids, so `down` stops them even when start failed
        return af


def airflow_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run an ``airflow`` command against the running deployment (its home, metadata DB, connections)."""
    stack = state.require()
    af = stack.get("airflow")
    if not af:
        raise StackError("Airflow is not running: start it with `scripts/stack up --airflow`")
    env = airflow.command_env(af, info.from_stack(stack).airflow_env())
    return subprocess.run(
        [airflow.airflow_bin(), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def stop_airflow() -> None:
    """Stop the Airflow components (if any) and forget them."""
    with state.lock():
        stack = state.load()
        if stack.get("airflow"):
            airflow.stop(stack.pop("airflow"))
            state.save(stack)
