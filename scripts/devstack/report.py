"""What runs where: each recorded service's pid, whether it is alive and answers, and how to connect
(never a password, only the files that hold them)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from . import (
    airflow,
    cdc,
    iceberg_rest,
    info,
    jars,
    kafka,
    kafka_probe,
    postgres,
    procs,
    schema_registry,
    seaweedfs,
    spark_connect,
    spark_lines,
    state,
    tls,
    toxiproxy,
)
from . import spark_cluster as spark


def _service(
    cfg: dict[str, Any], alive: bool, answers: Callable[[], bool], address: str, **details: Any
) -> dict[str, Any]:
    """One service's line: its pid, whether it is alive and answers (asked only of a live one), where."""
    return {"pid": cfg.get("pid"), "alive": alive, "answers": alive and answers(), "address": address, **details}


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
        services["spark_connect"] = _service(
            cs,
            spark_connect.is_running(cs),
            partial(procs.port_open, cs["port"], cs["host"]),
            f"sc://{spark_connect.CLIENT_HOST}:{cs['port']}",
            log=cs["log"],
        )
    for version, cl in stack.get("spark_connect_lines", {}).items():
        services[f"spark_connect_{version}"] = _service(
            cl,
            spark_connect.is_running(cl),
            partial(procs.port_open, cl["port"], cl["host"]),
            f"sc://{spark_connect.CLIENT_HOST}:{cl['port']}",
            spark_version=version,
            spark_home=cl["spark_home"],
            conn_id=cl["conn_id"],
            token_file=cl["token_file"],
            log=cl["log"],
        )
    return services


def _kafka_answers(kc: dict[str, Any]) -> bool:
    """Metadata on the PLAINTEXT listener, and a TLS handshake on the SASL_SSL one where there is one."""
    return kafka_probe.probe(kc["host"], kc["port"]) and (
        not kafka.has_sasl_ssl(kc) or tls.handshake(kc["host"], kc["sasl_ssl_port"], kc["ssl_ca_file"])
    )


def _catalog_services(stack: dict[str, Any]) -> dict[str, Any]:
    """The schema registry and the Iceberg REST catalog (with their JVMs' resident memory)."""
    found: dict[str, Any] = {}
    sr = stack.get("schema_registry")
    if sr:
        rss = schema_registry.rss_bytes(sr)
        found["schema_registry"] = _service(
            sr,
            schema_registry.is_running(sr),
            partial(schema_registry.probe, sr),
            schema_registry.url(sr),
            version=f"Apicurio Registry {sr['version']}",
            rss_mb=round(rss / 2**20) if rss else None,
            data_dir=sr["data_dir"],
            log=sr["stdout"],
        )
    ir = stack.get("iceberg_rest")
    if ir:
        rss = iceberg_rest.rss_bytes(ir)
        found["iceberg_rest"] = _service(
            ir,
            iceberg_rest.is_running(ir),
            partial(iceberg_rest.probe, ir),
            iceberg_rest.url(ir),
            version=f"Apache Iceberg {ir['version']}",
            rss_mb=round(rss / 2**20) if rss else None,
            log=ir["stdout"],
        )
    return found


def _proxy_service(stack: dict[str, Any]) -> dict[str, Any]:
    """The fault proxy (started on demand) and where each of its proxies listens."""
    tp = stack.get("toxiproxy")
    if not tp:
        return {}
    proxies = {p.name: f"{p.listen} -> {p.upstream}" for p in toxiproxy.layout(stack, tp["ports"])}
    return {
        "toxiproxy": _service(
            tp,
            toxiproxy.is_running(tp),
            partial(toxiproxy.answers, tp),
            toxiproxy.url(tp),
            version=f"toxiproxy {tp['version']}",
            proxies=proxies,
            log=tp["log"],
        )
    }


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
        services["postgres"] = _service(
            pg,
            postgres.is_running(pg),
            partial(postgres.ready, pg),
            f"{pg['host']}:{pg['port']}",
            data_dir=pg["data_dir"],
            log=pg["log"],
        )
    if kc:
        services["kafka"] = _service(
            kc,
            kafka.is_running(kc),
            partial(_kafka_answers, kc),
            f"{kc['host']}:{kc['port']}",
            sasl_address=f"{kc['host']}:{kc['sasl_port']}" if kafka.has_sasl(kc) else None,
            sasl_ssl_address=f"{kc['host']}:{kc['sasl_ssl_port']}" if kafka.has_sasl_ssl(kc) else None,
            proxied_address=f"{kc['host']}:{kc['proxied_port']}" if kafka.has_proxied(kc) else None,
            controller=f"{kc['host']}:{kc['controller_port']}",
            log_dirs=kc["log_dirs"],
            log=kc["log"],
        )
    services.update(_spark_services(stack))
    s3 = stack.get("s3")
    if s3:
        services["s3"] = _service(
            s3,
            seaweedfs.is_running(s3),
            partial(seaweedfs.probe, s3),
            seaweedfs.endpoint(s3),
            data_dir=s3["data_dir"],
            log=s3["stdout"],
        )
    services.update(_catalog_services(stack))
    cd = stack.get("cdc")
    if cd:
        services["cdc"] = _service(
            cd,
            cdc.is_running(cd),
            lambda: cdc.running(cdc.status(cd)),
            f"http://{cd['host']}:{cd['port']}",
            version=f"Kafka Connect + Debezium {jars.DEBEZIUM_VERSION}",
            database=cd["database"],
            topics=f"{cd['topic_prefix']}.<schema>.<table>",
            start_s=cd.get("start_s"),
            log=cd["stdout"],
        )
    services.update(_proxy_service(stack))
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
        sr = stack.get("schema_registry")
        if sr:
            out["connect"].update(
                {
                    "schema_registry_url": si.schema_registry_url,
                    "schema_registry_user": si.schema_registry_user,
                    "schema_registry_password_file": sr["password_file"],
                    "schema_registry_connection_id": info.SCHEMA_REGISTRY_CONN_ID,
                }
            )
        ir = stack.get("iceberg_rest")
        if ir:
            out["connect"].update(
                {
                    "iceberg_rest_uri": si.iceberg_rest_uri,
                    "iceberg_rest_client_id": si.iceberg_rest_client_id,
                    "iceberg_rest_client_secret_file": ir["client_secret_file"],
                    "iceberg_rest_warehouse": si.iceberg_rest_warehouse,
                    "iceberg_rest_connection_id": info.ICEBERG_REST_CONN_ID,
                }
            )
    return out


def left_running(st: dict[str, Any]) -> str:
    """What a command that started the stack (``scripts/demo``) leaves running, and how to stop it: each
    service with its address, from :func:`status`."""
    if not st["services"]:
        return "the local stack is down: nothing is left running"
    lines = [f"left running: the local stack (state dir {st['state_dir']}):"]
    for name, svc in st["services"].items():
        where = svc.get("address") or svc.get("webui") or ""
        lines.append(f"  {name:<22} {where}".rstrip() + ("" if svc["alive"] else "  (not running)"))
    lines.append("details and credentials: `scripts/stack status`")
    lines.append("stop it (and delete its data): `scripts/stack down`; to keep the data: `scripts/stack down --keep`")
    return "\n".join(lines)
