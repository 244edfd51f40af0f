"""A real Airflow deployment on loopback: api-server (UI + REST), scheduler, dag-processor, triggerer.

It runs the project's ``dags/`` with LocalExecutor, its metadata in a database
``airflow_<major>_<minor>`` of the stack's PostgreSQL (one per Airflow line: a line cannot migrate a
database a newer one has), in a throwaway AIRFLOW_HOME under the stack dir. The stack's connections come
in as ``AIRFLOW_CONN_*`` env vars. Login: SimpleAuthManager, user ``admin`` with a password
generated once per deployment (``<home>/passwords.json``, 0600). Secrets (the metadata DB URL, the
JWT secret) live in ``<home>/airflow.cfg`` (0600), never on a command line.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

from . import postgres, procs, state
from .errors import StackError

USER = "admin"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
# The scheduler (LocalExecutor) and the triggerer would each start a log server bound to every
# interface on a fixed port (8793/8794). The api-server runs on the same machine and reads the
# task and trigger log files directly, so they are not started.
ARGUMENTS = {"scheduler": ["--skip-serve-logs"], "triggerer": ["--skip-serve-logs"]}
REPO = Path(__file__).resolve().parents[2]
# each file in dags/ declares one DAG named after it; tests use them all as soon as Airflow is up
PROJECT_DAGS = frozenset(path.stem for path in (REPO / "dags").glob("*.py"))
# DAGs whose file defines them only where the installed Airflow has the feature they ride on (airflow_features)
FEATURE_DAGS = {"kafka_batch_partition_example": "partitioned_assets"}
# dags/ (the dags_folder) and the benchmarks' DAGs (benchmarks/dags/, for the scheduler section)
DAG_BUNDLES = [
    {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
    {
        "name": "benchmarks",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": str(REPO / "benchmarks" / "dags")},
    },
]


def database() -> str:
    """The metadata database of the installed Airflow's line: each line migrates its own, since an older
    line refuses a database a newer line has migrated (and the matrix runs every line on one stack)."""
    major, minor = version("apache-airflow").split(".")[:2]
    return f"airflow_{major}_{minor}"


def airflow_bin() -> str:
    path = Path(sys.executable).parent / "airflow"
    if not path.exists():
        raise StackError(f"{path} not found: run scripts/bootstrap (Airflow is installed in .venv)")
    return str(path)


def configure(sd: Path, pg: Mapping[str, Any], ledger_schema: str) -> dict[str, Any]:
    """Create AIRFLOW_HOME with its airflow.cfg and password file; return the config record."""
    home = sd / "airflow"
    if home.exists():
        shutil.rmtree(home)
    (home / "logs").mkdir(parents=True)
    port = procs.free_port()
    password = secrets.token_urlsafe(18)
    db_password = Path(pg["password_file"]).read_text().strip()
    url = f"http://{state.LOOPBACK}:{port}"
    cfg_text = f"""[core]
dags_folder = {REPO / "dags"}
executor = LocalExecutor
load_examples = False
dags_are_paused_at_creation = False
parallelism = 4
auth_manager = airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
simple_auth_manager_users = {USER}:admin
simple_auth_manager_passwords_file = {home / "passwords.json"}
execution_api_server_url = {url}/execution/

[database]
sql_alchemy_conn = postgresql+psycopg2://{pg["user"]}:{db_password}@{pg["host"]}:{pg["port"]}/{database()}

[api]
host = {state.LOOPBACK}
port = {port}
base_url = {url}
workers = 1

[api_auth]
jwt_secret = {secrets.token_urlsafe(64)}

[scheduler]
dag_dir_list_interval = 5

[dag_processor]
refresh_interval = 5
dag_bundle_config_list = {json.dumps(DAG_BUNDLES)}

[logging]
base_log_folder = {home / "logs"}

[kafka_offsets]
ledger_schema = {ledger_schema}
"""
    for name, text in (("airflow.cfg", cfg_text), ("passwords.json", json.dumps({USER: password}) + "\n")):
        path = home / name
        path.write_text(text)
        os.chmod(path, 0o600)
    return {
        "home": str(home),
        "port": port,
        "url": url,
        "airflow": airflow_bin(),  # the install it runs (a test run on another Airflow line must not reuse it)
        "user": USER,
        "ledger_schema": ledger_schema,
        "password_file": str(home / "passwords.json"),
        "pids": {},
    }


def password(cfg: Mapping[str, Any]) -> str:
    passwords: dict[str, str] = json.loads(Path(cfg["password_file"]).read_text())
    return passwords[cfg["user"]]


def command_env(cfg: Mapping[str, Any], connections: Mapping[str, str]) -> dict[str, str]:
    """The environment of the deployment's processes and of ``airflow`` commands run against it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env.update(connections)
    env.update(
        {
            "AIRFLOW_HOME": cfg["home"],
            "AIRFLOW_CONFIG": f"{cfg['home']}/airflow.cfg",
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        }
    )
    return env


def marker(component: str) -> str:
    """What the component's command line holds; the api-server retitles itself "airflow api_server ..."."""
    return {"api-server": "airflow api"}.get(component, f"airflow {component}")


def is_running(cfg: Mapping[str, Any]) -> bool:
    return all(procs.pid_alive(cfg["pids"].get(c), marker(c)) for c in COMPONENTS)


def start(
    cfg: dict[str, Any], pg: Mapping[str, Any], connections: Mapping[str, str], timeout: float = 300
) -> dict[str, Any]:
    """Migrate the metadata DB, start the components, wait until the UI serves the DAGs."""
    postgres.ensure_database(dict(pg), database())
    env = command_env(cfg, connections)
    cfg["connections"] = sorted(
        k.removeprefix("AIRFLOW_CONN_").lower() for k in connections if k.startswith("AIRFLOW_CONN_")
    )
    airflow = airflow_bin()
    procs.run([airflow, "db", "migrate"], "airflow db migrate", env=env, timeout=timeout)
    expected = defined_dags(env)
    home = Path(cfg["home"])
    for component in COMPONENTS:
        if not procs.pid_alive(cfg["pids"].get(component), marker(component)):
            if component == "api-server":
                procs.ensure_port_free(cfg["port"], "Airflow api-server")
            cfg["pids"][component] = procs.spawn_detached(
                [airflow, component, *ARGUMENTS.get(component, [])],
                home / "logs" / f"{component}.out",
                cwd=home,
                env=env,
            )
    _wait_ready(cfg, expected, timeout)
    return cfg


def token(cfg: Mapping[str, Any]) -> str:
    """A REST API bearer token for the admin user."""
    body = json.dumps({"username": cfg["user"], "password": password(cfg)}).encode()
    request = urllib.request.Request(
        f"{cfg['url']}/auth/token", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        access_token: str = json.loads(response.read())["access_token"]
        return access_token


def api(
    cfg: Mapping[str, Any],
    path: str,
    bearer: str | None = None,
    timeout: float = 120,
    method: str = "GET",
    body: Mapping[str, Any] | None = None,
) -> Any:
    """Call the REST API (``/api/v2/...``) as admin (``bearer``: a token from :func:`token`)."""
    request = urllib.request.Request(
        f"{cfg['url']}/api/v2/{path.lstrip('/')}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {bearer or token(cfg)}", "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def defined_dags(env: Mapping[str, str]) -> frozenset[str]:
    """The project's DAGs this Airflow defines: those of ``FEATURE_DAGS`` only where it has their feature (the
    installed package's probe, run in the deployment's interpreter and environment)."""
    probe = procs.run(
        [sys.executable, "-m", "airflow_kafka_offsets.airflow_features"],
        "the Airflow feature probe",
        cwd=env["AIRFLOW_HOME"],  # not a clone's root, whose sources would shadow the installed package
        # Airflow 3.2 logs alembic's plugin setup at INFO to stdout, ahead of the probe's JSON
        env={**env, "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"},
    )
    features: dict[str, bool] = json.loads(probe.stdout)["features"]
    return frozenset(dag for dag in PROJECT_DAGS if features.get(FEATURE_DAGS.get(dag, ""), True))


def _wait_ready(cfg: Mapping[str, Any], expected: frozenset[str], timeout: float) -> None:
    """Healthy scheduler, dag-processor and triggerer, and the project's DAGs (``expected``) parsed."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        for component in COMPONENTS:
            # No cmdline marker here: the pids were spawned just now (no recycling to guard against),
            # and a process read right after its fork may not show its final cmdline yet.
            if not procs.pid_alive(cfg["pids"].get(component)):
                log = Path(cfg["home"]) / "logs" / f"{component}.out"
                raise StackError(f"Airflow {component} exited:\n{procs.tail(log)}")
        try:
            health = json.loads(urllib.request.urlopen(f"{cfg['url']}/api/v2/monitor/health", timeout=5).read())
            healthy = all(
                health.get(c, {}).get("status") == "healthy"
                for c in ("metadatabase", "scheduler", "dag_processor", "triggerer")
            )
            dags = {d["dag_id"] for d in api(cfg, "dags?limit=100")["dags"]} if healthy else set()
            missing = sorted(expected - dags)
            if not missing:
                return
            errors = api(cfg, "importErrors?limit=100")["import_errors"] if healthy else []
            last = f"health {health}, not parsed yet {missing}, import errors {errors}"
        except (OSError, ValueError, urllib.error.URLError) as exc:
            last = str(exc)
        time.sleep(2)
    raise StackError(f"Airflow did not become ready in {timeout:.0f}s ({last}); logs in {cfg['home']}/logs")


def stop(cfg: Mapping[str, Any], components: tuple[str, ...] = COMPONENTS) -> None:
    for component in reversed(components):
        procs.terminate(cfg["pids"].get(component), marker(component))
