"""Toxiproxy, the network fault proxy, in front of the stack's services (started on demand, not by ``up``).

The server is built from the Go module proxy (``go install github.com/Shopify/toxiproxy/v2/cmd/server``)
into the cache once (``<cache>/toxiproxy-<version>/server``); it runs on a free loopback port and gets one
proxy per service (:func:`layout`): PostgreSQL, Kafka, the S3 server, the schema registry and the Spark
Connect server when they run. Kafka advertises its own address, so the broker has a listener of its own
for the proxy (``PROXIED``, kafka.py) that advertises the proxy's port: a client bootstrapped there is
told to reach the broker through the proxy again, and so is Spark's Kafka source.

:func:`connections` are the Airflow connections through the proxies, for a worker whose every link a test
can slow, cut or black-hole with :mod:`devstack.toxiproxy_api`.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import procs, state
from .errors import StackError
from .toxiproxy_api import Client, Proxy

VERSION = "2.5.0"
MODULE = "github.com/Shopify/toxiproxy/v2"
SERVICES = ("postgres", "kafka", "s3", "schema_registry", "spark_connect")


@dataclass(frozen=True)
class Proxied:
    """A running toxiproxy: its API and the Airflow connections (env vars) through its proxies."""

    api_url: str
    env: dict[str, str]

    def __repr__(self) -> str:  # the connections hold passwords
        return f"Proxied(api_url={self.api_url!r}, connections={sorted(self.env)})"


def build_dir(version: str = VERSION) -> Path:
    return state.cache_dir() / f"toxiproxy-{version}"


def fetch(version: str = VERSION) -> Path:
    """The toxiproxy server binary, built once with the Go toolchain from the module proxy."""
    dest = build_dir(version)
    binary = dest / "server"
    with state.cache_lock(dest):
        if not binary.is_file():
            go = procs.require_tool("go", "install Go 1.22+ to build toxiproxy from the Go module proxy")
            dest.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "GOBIN": str(dest), "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0"}
            procs.run([go, "install", f"{MODULE}/cmd/server@v{version}"], f"go install toxiproxy {version}", env=env)
            if not binary.is_file():
                raise StackError(f"go install toxiproxy {version} left no {binary}")
    return binary


def fetch_if_go() -> str:
    """The server's path, built now if Go is installed (what bootstrap does, so the first fault test does not
    pay for the build); otherwise why not (it is built on first use)."""
    if shutil.which("go") is None:
        return "not built: no go on PATH (scripts/faults --network and its test build it on first use)"
    return str(fetch())


def configure(sd: Path) -> dict[str, Any]:
    base = sd / "toxiproxy"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    return {
        "binary": str(fetch()),
        "version": VERSION,
        "base_dir": str(base),
        "host": state.LOOPBACK,
        "port": procs.free_port(),
        "ports": {},  # service -> the proxy's listen port (Kafka's is the broker's advertised PROXIED port)
        "log": str(base / "toxiproxy.log"),
    }


def url(cfg: dict[str, Any]) -> str:
    return f"http://{cfg['host']}:{cfg['port']}"


def client(cfg: dict[str, Any]) -> Client:
    return Client(url(cfg))


def layout(stack: dict[str, Any], ports: dict[str, int]) -> list[Proxy]:
    """One proxy per running service of ``stack``: listening on ``ports[service]``, relayed to the service.
    Kafka's proxy listens on the broker's advertised ``proxied_port`` and relays to its ``proxied_backend_port``."""
    upstreams: dict[str, Any] = {
        "postgres": (stack.get("postgres") or {}).get("port"),
        "kafka": (stack.get("kafka") or {}).get("proxied_backend_port"),
        "s3": (stack.get("s3") or {}).get("port"),
        "schema_registry": (stack.get("schema_registry") or {}).get("port"),
        "spark_connect": (stack.get("spark_connect") or {}).get("port"),
    }
    listen: dict[str, Any] = {**ports, "kafka": (stack.get("kafka") or {}).get("proxied_port")}
    return [
        Proxy(name, int(listen[name]), f"{state.LOOPBACK}:{port}")
        for name, port in upstreams.items()
        if port and listen.get(name)
    ]


def allocate(cfg: dict[str, Any], stack: dict[str, Any]) -> None:
    """A listen port for each running service without one yet (Kafka's is fixed by the broker's config)."""
    for name in SERVICES:
        if name != "kafka" and stack.get(name) and name not in cfg["ports"]:
            cfg["ports"][name] = procs.free_port()


def _marker(cfg: dict[str, Any]) -> str:
    return str(cfg["binary"])


def start(cfg: dict[str, Any], timeout: float = 30) -> int:
    procs.ensure_port_free(cfg["port"], "toxiproxy", wait_s=5)
    argv = [cfg["binary"], "-host", cfg["host"], "-port", str(cfg["port"])]
    pid = procs.spawn_detached(argv, Path(cfg["log"]), cwd=Path(cfg["base_dir"]))
    procs.wait_answering("toxiproxy", pid, lambda: answers(cfg), cfg["log"], timeout, 0.1)
    return pid


def answers(cfg: dict[str, Any]) -> bool:
    try:
        client(cfg).version()
    except (OSError, urllib.error.URLError):
        return False
    return True


def populate(cfg: dict[str, Any], stack: dict[str, Any]) -> list[Proxy]:
    """Create (or update) the proxies of the running services; a listen port taken by another process is
    named in the error."""
    allocate(cfg, stack)
    proxies = layout(stack, cfg["ports"])
    try:
        client(cfg).populate(proxies)
    except StackError as exc:
        raise StackError(f"{exc} (listen ports {json.dumps({p.name: p.listen_port for p in proxies})})") from None
    return proxies


def stop(cfg: dict[str, Any], hard: bool = False) -> None:
    procs.terminate(cfg.get("pid"), marker=_marker(cfg), timeout=10, kill=hard)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), marker=_marker(cfg))


def connections(stack: dict[str, Any], airflow_env: dict[str, str]) -> dict[str, str]:
    """The Airflow connections of ``airflow_env`` whose services have a proxy, rewritten to reach them
    through it: the ledger, Kafka (its PROXIED listener), the S3 server, the schema registry and the
    Spark Connect server."""
    cfg = stack["toxiproxy"]
    ports = {**cfg["ports"], "kafka": stack["kafka"]["proxied_port"]}
    env: dict[str, str] = {}
    through = f"{state.LOOPBACK}:{{}}"

    def rewrite(var: str, change: Any) -> None:
        if var in airflow_env:
            env[var] = json.dumps(change(json.loads(airflow_env[var])))

    rewrite(
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        lambda c: c | {"extra": c["extra"] | {"bootstrap.servers": through.format(ports["kafka"])}},
    )
    if "postgres" in ports:
        rewrite("AIRFLOW_CONN_POSTGRES_DEFAULT", lambda c: c | {"host": state.LOOPBACK, "port": ports["postgres"]})
    if "s3" in ports:
        endpoint = f"http://{through.format(ports['s3'])}"
        rewrite("AIRFLOW_CONN_KAFKA_OFFSETS_S3", lambda c: c | {"extra": c["extra"] | {"endpoint_url": endpoint}})
    if "schema_registry" in ports:
        rewrite(
            "AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT",
            lambda c: (
                c
                | {"host": c["host"].replace(f":{stack['schema_registry']['port']}/", f":{ports['schema_registry']}/")}
            ),
        )
    if "spark_connect" in ports:
        rewrite("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", lambda c: c | {"port": ports["spark_connect"]})
    return env
