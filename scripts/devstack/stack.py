"""Orchestration: bring the whole stack up/down idempotently, report status, restart parts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import (
    airflow,
    info,
    jars,
    kafka,
    postgres,
    procs,
    schema_registry,
    seaweedfs,
    spark_connect,
    spark_lines,
    state,
    tls,
)
from . import spark_cluster as spark
from .errors import StackError
from .info import StackInfo

STACK_VERSION = 1


def _say(msg: str) -> None:
    print(f"devstack: {msg}", file=sys.stderr, flush=True)


def up(spark_cluster: bool = False, spark_connect_server: bool = False, spark_version: str | None = None) -> StackInfo:
    """Start (or reuse) PostgreSQL + Kafka + the S3 server + the schema registry, and a Spark cluster or
    Connect server if asked.

    ``spark_version`` (a release or a line, with ``spark_connect_server``): the Connect server of that
    Spark line instead of the default one (see :func:`start_spark_connect`). Servers recorded earlier
    are started again if they died.
    """
    line = _line_version(spark_version)
    if line and not spark_connect_server:
        raise StackError("a Spark version applies to the Spark Connect server only: add --spark-connect")
    with state.lock():
        sd = state.ensure_state_dir()
        stack = state.load() or {"version": STACK_VERSION, "state_dir": str(sd)}
        libs_dir, connector = jars.fetch_all()
        stack["cache_dir"] = str(state.cache_dir())
        stack["connector_jars"] = [str(p) for p in connector]
        stack["s3a_jars"] = [str(p) for p in jars.fetch_s3a()]
        stack["postgres"] = _ensure_postgres(sd, stack.get("postgres"))
        state.save(stack)
        stack["kafka"] = _ensure_kafka(sd, stack.get("kafka"), libs_dir)
        state.save(stack)
        stack["s3"] = _ensure_s3(sd, stack.get("s3"))
        state.save(stack)
        stack["schema_registry"] = _ensure_schema_registry(sd, stack.get("schema_registry"))
        state.save(stack)
        if spark_cluster or stack.get("spark"):
            stack["spark"] = _ensure_spark(sd, stack.get("spark"))
            state.save(stack)
        if (spark_connect_server and not line) or stack.get("spark_connect"):
            stack["spark_connect"] = _ensure_spark_connect(sd, stack)
            state.save(stack)
        for version in sorted({*stack.get("spark_connect_lines", {}), *([line] if line else [])}):
            _ensure_spark_connect_line(sd, stack, version)
            state.save(stack)
        return info.from_stack(stack)


def _ensure_postgres(sd: Path, pg: dict[str, Any] | None) -> dict[str, Any]:
    if pg and postgres.is_running(pg):
        _say(f"PostgreSQL already running (pid {pg['pid']}, port {pg['port']})")
    elif pg and (Path(pg["data_dir"]) / "PG_VERSION").exists():
        _say(f"starting existing PostgreSQL cluster on port {pg['port']}")
        pg["pid"] = postgres.start(pg)
    else:
        pg = postgres.initdb(sd, procs.free_port())
        _say(f"initialised PostgreSQL cluster in {pg['data_dir']}; starting on port {pg['port']}")
        pg["pid"] = postgres.start(pg)
    postgres.ensure_database(pg)  # also waits (30 s) for a running server to accept logins
    return pg


def _ensure_kafka(sd: Path, kc: dict[str, Any] | None, libs_dir: Path) -> dict[str, Any]:
    # A stack started before the SASL_PLAINTEXT or the SASL_SSL listener existed: add them on the
    # same data and ports (one broker restart; PLAINTEXT clients reconnect by themselves).
    added = []
    if kc and not kafka.has_sasl(kc):
        kafka.enable_sasl(kc, sd, procs.free_port())
        added.append(f"SASL_PLAINTEXT on {kc['host']}:{kc['sasl_port']}")
    if kc and not kafka.has_sasl_ssl(kc):
        kafka.enable_sasl_ssl(kc, sd, procs.free_port())
        added.append(f"SASL_SSL on {kc['host']}:{kc['sasl_ssl_port']}")
    if kc and added and kafka.is_running(kc):
        _say(f"adding listener(s) {', '.join(added)}: restarting Kafka (pid {kc['pid']})")
        kafka.stop(kc)
    if kc and kafka.is_running(kc):
        if kafka.wait_ready(kc, kc["pid"], timeout=30):
            _say(
                f"Kafka already running (pid {kc['pid']}, {kc['host']}:{kc['port']}, "
                f"SASL {kc['host']}:{kc['sasl_port']}, SASL_SSL {kc['host']}:{kc['sasl_ssl_port']})"
            )
            return kc
        _say(f"Kafka pid {kc['pid']} does not answer; restarting it")
        kafka.stop(kc)
    if kc and (Path(kc["log_dirs"]) / "meta.properties").exists():
        _say(f"starting existing Kafka broker on {kc['host']}:{kc['port']}")
    else:
        kc = kafka.configure(sd, libs_dir, *procs.free_ports(4))
        _say(
            f"starting new Kafka KRaft broker on {kc['host']}:{kc['port']} "
            f"(SASL_PLAINTEXT/PLAIN on port {kc['sasl_port']}, SASL_SSL/{kc['sasl_ssl_mechanism']} "
            f"on port {kc['sasl_ssl_port']})"
        )
    kc["pid"] = kafka.start(kc)
    return kc


def _ensure_s3(sd: Path, s3: dict[str, Any] | None) -> dict[str, Any]:
    if s3 and seaweedfs.is_running(s3):
        if seaweedfs.probe(s3):
            seaweedfs.ensure_bucket(s3)
            _say(f"S3 server already running (pid {s3['pid']}, {seaweedfs.endpoint(s3)})")
            return s3
        _say(f"S3 server pid {s3['pid']} does not answer; restarting it")
        seaweedfs.stop(s3)
    if s3 and Path(s3["credentials_file"]).is_file():
        _say(f"starting existing S3 server on {seaweedfs.endpoint(s3)}")
    else:
        s3 = seaweedfs.configure(sd, procs.free_ports(len(seaweedfs.PORT_NAMES)))
        _say(f"starting new S3 server (SeaweedFS) on {seaweedfs.endpoint(s3)}, bucket {s3['bucket']}")
    s3["pid"] = seaweedfs.start(s3)
    return s3


def _ensure_schema_registry(sd: Path, sr: dict[str, Any] | None) -> dict[str, Any]:
    if sr and schema_registry.is_running(sr):
        if schema_registry.probe(sr):
            _say(f"schema registry already running (pid {sr['pid']}, {schema_registry.url(sr)})")
            return sr
        _say(f"schema registry pid {sr['pid']} does not answer; restarting it")
        schema_registry.stop(sr)
    if sr and Path(sr["config"]).is_file():
        _say(f"starting existing schema registry on {schema_registry.url(sr)}")
    else:
        app = jars.fetch_apicurio()
        sr = schema_registry.configure(sd, app, *procs.free_ports(2))
        _say(f"starting new schema registry (Apicurio Registry {sr['version']}) on {schema_registry.url(sr)}")
    sr["pid"] = schema_registry.start(sr)
    return sr


def _ensure_spark(sd: Path, sc: dict[str, Any] | None) -> dict[str, Any]:
    if sc and spark.is_running(sc) and spark.alive_workers(sc) > 0:
        _say(f"Spark cluster already running ({sc['master_url']})")
        return sc
    sc = sc or spark.configure(sd)
    _say(f"starting Spark standalone master + worker ({sc['master_url']})")
    return spark.start(sc)


def _ensure_spark_connect(sd: Path, stack: dict[str, Any]) -> dict[str, Any]:
    sc: dict[str, Any] | None = stack.get("spark_connect")
    if sc and spark_connect.is_running(sc) and procs.port_open(sc["port"], sc["host"]):
        _say(f"Spark Connect server already running (pid {sc['pid']}, {sc['host']}:{sc['port']})")
        return sc
    if sc:
        spark_connect.stop(sc)
    else:
        sc = spark_connect.configure(sd, stack["connector_jars"], stack["s3a_jars"])
    _say(f"starting Spark Connect server on {sc['host']}:{sc['port']}")
    sc["pid"] = spark_connect.start(sc)
    return sc


def _line_version(spark_version: str | None) -> str | None:
    """The release a Connect server of another line runs; ``None`` for the default server (no
    version, or the worker's own pyspark release: the default server is that line's server)."""
    if spark_version is None:
        return None
    version = spark_lines.resolve(spark_version)
    return None if spark_lines.is_worker_version(version) else version


def _ensure_spark_connect_line(sd: Path, stack: dict[str, Any], version: str) -> dict[str, Any]:
    """Start (or reuse) the Connect server of one Spark release, recorded in ``spark_connect_lines``."""
    lines = stack.setdefault("spark_connect_lines", {})
    sc = lines.get(version)
    if sc and spark_connect.is_running(sc) and procs.port_open(sc["port"], sc["host"]):
        _say(f"Spark {version} Connect server already running (pid {sc['pid']}, {sc['host']}:{sc['port']})")
        return dict(sc)
    if sc:
        spark_connect.stop(sc)
    else:
        home = spark_lines.spark_home(version)
        connector = [str(p) for p in (*jars.fetch_connector(version, spark_home=home), *jars.fetch_avro(version))]
        sc = spark_connect.configure(sd, connector, _s3a_jars_of_line(home, version), home, version)
    _say(f"starting Spark {version} Connect server on {sc['host']}:{sc['port']} ({sc['spark_home']})")
    lines[version] = sc
    state.save(stack)  # the record first: `down` finds a server whose start failed half-way
    sc["pid"] = spark_connect.start(sc)
    return dict(sc)


def _s3a_jars_of_line(home: Path, version: str) -> list[str]:
    """The line's S3A jars, or none where the stack has none for it (Spark 3.5: AWS SDK v1)."""
    try:
        return [str(p) for p in jars.fetch_s3a(spark_home=home)]
    except StackError as exc:
        _say(f"Spark {version} Connect server without S3A: {exc}")
        return []


def start_spark_connect(spark_version: str | None = None) -> dict[str, Any]:
    """Start (or reuse) a Spark Connect server of the running stack; returns its Airflow connection.

    ``spark_version`` (a release such as ``"4.1.2"`` or a line such as ``"4.1"``): a server of that
    Spark line, run from its home (installed if needed) with its connector and S3A jars, on its own
    port and state dir (connection id ``spark_connect.conn_id(version)``); servers of several lines
    run at once. Without it (or with the worker's own release): the default server, as always.
    """
    line = _line_version(spark_version)
    with state.lock():
        stack = _require_stack()
        sd = Path(stack["state_dir"])
        if line is None:
            stack["spark_connect"] = _ensure_spark_connect(sd, stack)
            state.save(stack)
            return spark_connect.connection(stack["spark_connect"])
        try:
            cfg = _ensure_spark_connect_line(sd, stack, line)
        finally:
            state.save(stack)
        return spark_connect.connection(cfg)


def restart_spark_connect(hard: bool = False, spark_version: str | None = None) -> None:
    """Stop (``hard``: SIGKILL, a crash) and start a Connect server on the same port and token."""
    line = _line_version(spark_version)
    if line is None:
        _restart("spark_connect", spark_connect, hard, "run `scripts/stack up --spark-connect`")
        return
    with state.lock():
        stack = _require_stack()
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
    line = _line_version(spark_version)
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
        stack = _require_stack()
        stack["spark"] = _ensure_spark(Path(stack["state_dir"]), stack.get("spark"))
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
        stack = _require_stack()
        af: dict[str, Any] | None = stack.get("airflow")
        if af and airflow.is_running(af):
            _say(f"Airflow already running ({af['url']})")
            return af
        if af:
            airflow.stop(af)
        af = airflow.configure(Path(stack["state_dir"]), stack["postgres"], ledger_schema)
        _say(f"starting Airflow {', '.join(airflow.COMPONENTS)} ({af['url']})")
        stack["airflow"] = af
        state.save(stack)
        try:
            airflow.start(af, stack["postgres"], info.from_stack(stack).airflow_env())
        finally:
            state.save(stack)  # the pids, so `down` stops them even when start failed
        return af


def airflow_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run an ``airflow`` command against the running deployment (its home, metadata DB, connections)."""
    stack = _require_stack()
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


def _stop_services(stack: dict[str, Any], keep_data: bool) -> None:
    """Every recorded service, the ones that use others first."""
    if stack.get("airflow"):
        _say("stopping Airflow")
        airflow.stop(stack.pop("airflow"))
    if stack.get("spark"):
        _say("stopping Spark worker + master")
        spark.stop(stack["spark"])
    if stack.get("spark_connect"):
        _say("stopping the Spark Connect server")
        spark_connect.stop(stack["spark_connect"])
    for version, cfg in stack.get("spark_connect_lines", {}).items():
        _say(f"stopping the Spark {version} Connect server")
        spark_connect.stop(cfg)
    if stack.get("schema_registry"):
        _say("stopping the schema registry")
        schema_registry.stop(stack["schema_registry"])
    if stack.get("s3"):
        _say("stopping the S3 server")
        # its data is deleted next unless kept: skip the filer's ~17 s graceful drain then
        seaweedfs.stop(stack["s3"], hard=not keep_data)
    if stack.get("kafka"):
        _say("stopping Kafka")
        kafka.stop(stack["kafka"])
    if stack.get("postgres"):
        _say("stopping PostgreSQL")
        postgres.stop(stack["postgres"])


def down(keep_data: bool = False) -> None:
    """Stop exactly what ``up`` started (by pid); remove the state dir unless ``keep_data``."""
    with state.lock():
        sd = state.state_dir()
        stack = state.load()
        if not stack:
            _say(f"nothing recorded in {sd}; nothing to stop")
        _stop_services(stack, keep_data)
        if keep_data:
            stack.pop("spark", None)  # spark has no data worth keeping; `up` starts it anew
            stack.pop("spark_connect", None)
            stack.pop("spark_connect_lines", None)
            if stack:
                state.save(stack)
            _say(f"data kept in {sd}")
        elif sd.exists():
            shutil.rmtree(sd)
            _say(f"removed {sd}")


def restart_kafka(hard: bool = False) -> None:
    """Stop and start the broker on the same ports and data (``hard``: SIGKILL, no clean shutdown)."""
    with state.lock():
        stack = _require_stack()
        kc = stack["kafka"]
        kafka.stop(kc, hard=hard)
        kc["pid"] = kafka.start(kc)
        state.save(stack)


def restart_postgres(mode: str = "fast") -> None:
    """Stop (``pg_ctl stop -m mode``: smart|fast|immediate) and start on the same port and data."""
    with state.lock():
        stack = _require_stack()
        pg = stack["postgres"]
        postgres.stop(pg, mode=mode)
        pg["pid"] = postgres.start(pg)
        state.save(stack)


def restart_s3(hard: bool = False) -> None:
    """Stop (``hard``: SIGKILL) and start the S3 server on the same ports, data and credentials."""
    _restart("s3", seaweedfs, hard, "run `scripts/stack up` (it adds one)")


def restart_schema_registry(hard: bool = False) -> None:
    """Stop (``hard``: SIGKILL) and start the schema registry on the same ports, storage and password."""
    _restart("schema_registry", schema_registry, hard, "run `scripts/stack up` (it adds one)")


def _restart(name: str, service: Any, hard: bool, hint: str) -> None:
    """Stop (``hard``: SIGKILL) and start one recorded service with its recorded config."""
    with state.lock():
        stack = _require_stack()
        cfg = stack.get(name)
        if not cfg:
            raise StackError(f"this stack has no {name} service; {hint}")
        service.stop(cfg, hard=hard)
        cfg["pid"] = service.start(cfg)
        state.save(stack)


def current() -> StackInfo:
    """StackInfo of the running stack without starting anything."""
    return info.from_stack(_require_stack())


def _require_stack() -> dict[str, Any]:
    stack = state.load()
    if not stack.get("postgres") or not stack.get("kafka"):
        raise StackError(f"the stack is not up (no {state.state_dir() / state.STACK_FILE}); run `scripts/stack up`")
    return stack


def _spark_services(stack: dict[str, Any]) -> dict[str, Any]:
    """The status of the standalone cluster and the Spark Connect servers."""
    services: dict[str, Any] = {}
    sc = stack.get("spark")
    if sc:
        marker = f"-Dako.stack.dir={sc['base_dir']}"
        services["spark_master"] = {
            "pid": sc.get("master_pid"),
            "alive": procs.pid_alive(sc.get("master_pid"), marker),
            "address": sc["master_url"],
            "webui": f"http://{sc['host']}:{sc['master_webui_port']}",
            "log": sc["master_log"],
        }
        services["spark_worker"] = {
            "pid": sc.get("worker_pid"),
            "alive": procs.pid_alive(sc.get("worker_pid"), marker),
            "webui": f"http://{sc['host']}:{sc['worker_webui_port']}",
            "alive_workers": spark.alive_workers(sc),
            "log": sc["worker_log"],
        }
    cs = stack.get("spark_connect")
    if cs:
        alive = spark_connect.is_running(cs)
        services["spark_connect"] = {
            "pid": cs.get("pid"),
            "alive": alive,
            "answers": alive and procs.port_open(cs["port"], cs["host"]),
            "address": f"sc://{spark_connect.CLIENT_HOST}:{cs['port']}",
            "log": cs["log"],
        }
    for version, cl in stack.get("spark_connect_lines", {}).items():
        alive = spark_connect.is_running(cl)
        services[f"spark_connect_{version}"] = {
            "pid": cl.get("pid"),
            "alive": alive,
            "answers": alive and procs.port_open(cl["port"], cl["host"]),
            "address": f"sc://{spark_connect.CLIENT_HOST}:{cl['port']}",
            "spark_version": version,
            "spark_home": cl["spark_home"],
            "conn_id": cl["conn_id"],
            "token_file": cl["token_file"],
            "log": cl["log"],
        }
    return services


def status() -> dict[str, Any]:
    """What runs where (pid, alive) and how to connect; never includes the password."""
    stack = state.load()
    out: dict[str, Any] = {"state_dir": str(state.state_dir()), "up": False, "services": {}}
    out["spark_homes"] = spark_lines.installed()
    if not stack:
        return out
    services = out["services"]
    pg, kc = stack.get("postgres"), stack.get("kafka")
    if pg:
        alive = postgres.is_running(pg)
        services["postgres"] = {
            "pid": pg.get("pid"),
            "alive": alive,
            "answers": alive and postgres.ready(pg),
            "address": f"{pg['host']}:{pg['port']}",
            "data_dir": pg["data_dir"],
            "log": pg["log"],
        }
    if kc:
        alive = kafka.is_running(kc)
        services["kafka"] = {
            "pid": kc.get("pid"),
            "alive": alive,
            "answers": alive
            and kafka.probe(kc["host"], kc["port"])
            and (not kafka.has_sasl_ssl(kc) or tls.handshake(kc["host"], kc["sasl_ssl_port"], kc["ssl_ca_file"])),
            "address": f"{kc['host']}:{kc['port']}",
            "sasl_address": (f"{kc['host']}:{kc['sasl_port']}" if kafka.has_sasl(kc) else None),
            "sasl_ssl_address": (f"{kc['host']}:{kc['sasl_ssl_port']}" if kafka.has_sasl_ssl(kc) else None),
            "controller": f"{kc['host']}:{kc['controller_port']}",
            "log_dirs": kc["log_dirs"],
            "log": kc["log"],
        }
    services.update(_spark_services(stack))
    s3 = stack.get("s3")
    if s3:
        alive = seaweedfs.is_running(s3)
        services["s3"] = {
            "pid": s3.get("pid"),
            "alive": alive,
            "answers": alive and seaweedfs.probe(s3),
            "address": seaweedfs.endpoint(s3),
            "data_dir": s3["data_dir"],
            "log": s3["stdout"],
        }
    sr = stack.get("schema_registry")
    if sr:
        alive = schema_registry.is_running(sr)
        rss = schema_registry.rss_bytes(sr)
        services["schema_registry"] = {
            "pid": sr.get("pid"),
            "alive": alive,
            "answers": alive and schema_registry.probe(sr),
            "address": schema_registry.url(sr),
            "version": f"Apicurio Registry {sr['version']}",
            "rss_mb": round(rss / 2**20) if rss else None,
            "data_dir": sr["data_dir"],
            "log": sr["stdout"],
        }
    af = stack.get("airflow")
    if af:
        for component in airflow.COMPONENTS:
            services[f"airflow_{component.replace('-', '_')}"] = {
                "pid": af["pids"].get(component),
                "alive": procs.pid_alive(af["pids"].get(component), airflow.marker(component)),
                "address": af["url"] if component == "api-server" else "",
                "log": f"{af['home']}/logs/{component}.out",
            }
        out["airflow"] = {
            "url": af["url"],
            "user": af["user"],
            "password_file": af["password_file"],
            "ledger_schema": af["ledger_schema"],
        }
    out["up"] = bool(services) and all(s["alive"] and s.get("answers", True) for s in services.values())
    if pg and kc:
        si = info.from_stack(stack)
        out["connect"] = {
            "bootstrap_servers": si.bootstrap_servers,
            "sasl_bootstrap_servers": si.sasl_bootstrap_servers,
            "sasl_mechanism": si.sasl_mechanism,
            "sasl_username": si.sasl_username,
            "sasl_password_file": kc.get("sasl_password_file"),
            "sasl_ssl_bootstrap_servers": si.sasl_ssl_bootstrap_servers,
            "sasl_ssl_mechanism": si.sasl_ssl_mechanism,
            "sasl_ssl_username": si.sasl_ssl_username,
            "sasl_ssl_password_file": kc.get("sasl_ssl_password_file"),
            "ssl_ca_file": si.ssl_ca_file,
            "kafka_sasl_ssl_connection_id": info.KAFKA_SASL_SSL_CONN_ID if si.sasl_ssl_bootstrap_servers else None,
            "kafka_sasl_ssl_connection": (
                si.kafka_sasl_ssl_connection(password=f"<content of {kc['sasl_ssl_password_file']}>")
                if si.sasl_ssl_bootstrap_servers
                else None
            ),
            "pg_dsn": f"host={si.pg_host} port={si.pg_port} user={si.pg_user} dbname={si.pg_database}",
            "pg_password_file": pg["password_file"],
            "spark_master_url": si.spark_master_url,
            "spark_connect_url": si.spark_connect_url,
            "spark_connect_token_file": (stack.get("spark_connect") or {}).get("token_file"),
            "connector_jars": list(si.connector_jars),
            "kafka_libs_dir": si.kafka_libs_dir,
            "airflow_env_vars": sorted(si.airflow_env(kafka_sasl_ssl=True)),
        }
        if s3:
            out["connect"].update(
                {
                    "s3_endpoint": si.s3_endpoint,
                    "s3_bucket": si.s3_bucket,
                    "s3_region": si.s3_region,
                    "s3_credentials_file": s3["credentials_file"],
                    "s3_connection_id": info.S3_CONN_ID,
                    "s3a_jars": list(si.s3a_jars),
                }
            )
        if sr:
            out["connect"].update(
                {
                    "schema_registry_url": si.schema_registry_url,
                    "schema_registry_user": si.schema_registry_user,
                    "schema_registry_password_file": sr["password_file"],
                    "schema_registry_connection_id": info.SCHEMA_REGISTRY_CONN_ID,
                }
            )
    return out
