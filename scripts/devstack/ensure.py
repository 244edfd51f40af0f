"""Start or reuse one service of the stack: reuse it when it runs and answers, else start it again on
its recorded ports and data, or configure a new one. Each returns the service's record for stack.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import iceberg_rest, jars, kafka, postgres, procs, schema_registry, seaweedfs, spark_connect, spark_lines, state
from . import spark_cluster as spark
from .errors import StackError, say


def postgres_server(sd: Path, pg: dict[str, Any] | None) -> dict[str, Any]:
    if pg and postgres.is_running(pg):
        say(f"PostgreSQL already running (pid {pg['pid']}, port {pg['port']})")
    elif pg and (Path(pg["data_dir"]) / "PG_VERSION").exists():
        say(f"starting existing PostgreSQL cluster on port {pg['port']}")
        pg["pid"] = postgres.start(pg)
    else:
        pg = postgres.initdb(sd, procs.free_port())
        say(f"initialised PostgreSQL cluster in {pg['data_dir']}; starting on port {pg['port']}")
        pg["pid"] = postgres.start(pg)
    postgres.ensure_database(pg)  # also waits (30 s) for a running server to accept logins
    return pg


def kafka_broker(sd: Path, kc: dict[str, Any] | None, libs_dir: Path) -> dict[str, Any]:
    # A stack started before the SASL_PLAINTEXT or the SASL_SSL listener existed: add them on the
    # same data and ports (one broker restart; PLAINTEXT clients reconnect by themselves).
    added = []
    if kc and not kafka.has_sasl(kc):
        kafka.enable_sasl(kc, sd, procs.free_port())
        added.append(f"SASL_PLAINTEXT on {kc['host']}:{kc['sasl_port']}")
    if kc and not kafka.has_sasl_ssl(kc):
        kafka.enable_sasl_ssl(kc, sd, procs.free_port())
        added.append(f"SASL_SSL on {kc['host']}:{kc['sasl_ssl_port']}")
    if kc and not kafka.has_proxied(kc):
        kafka.enable_proxied(kc, *procs.free_ports(2))
        added.append(f"PROXIED on {kc['host']}:{kc['proxied_backend_port']} for the fault proxy")
    if kc and added and kafka.is_running(kc):
        say(f"adding listener(s) {', '.join(added)}: restarting Kafka (pid {kc['pid']})")
        kafka.stop(kc)
    if kc and kafka.is_running(kc):
        if kafka.wait_ready(kc, kc["pid"], timeout=30):
            say(
                f"Kafka already running (pid {kc['pid']}, {kc['host']}:{kc['port']}, "
                f"SASL {kc['host']}:{kc['sasl_port']}, SASL_SSL {kc['host']}:{kc['sasl_ssl_port']})"
            )
            return kc
        say(f"Kafka pid {kc['pid']} does not answer; restarting it")
        kafka.stop(kc)
    if kc and (Path(kc["log_dirs"]) / "meta.properties").exists():
        say(f"starting existing Kafka broker on {kc['host']}:{kc['port']}")
    else:
        kc = kafka.configure(sd, libs_dir, *procs.free_ports(6))
        say(
            f"starting new Kafka KRaft broker on {kc['host']}:{kc['port']} "
            f"(SASL_PLAINTEXT/PLAIN on port {kc['sasl_port']}, SASL_SSL/{kc['sasl_ssl_mechanism']} "
            f"on port {kc['sasl_ssl_port']})"
        )
    kc["pid"] = kafka.start(kc)
    return kc


# A service module's function of its record: where it serves, or whether it answers there.
Of = Callable[[dict[str, Any]], Any]


def _reused(what: str, cfg: dict[str, Any] | None, service: Any, where: Of, answers: Of) -> dict[str, Any] | None:
    """The recorded service if it runs and ``answers``; one that runs but does not answer is stopped,
    to be started again."""
    if not (cfg and service.is_running(cfg)):
        return None
    if answers(cfg):
        say(f"{what} already running (pid {cfg['pid']}, {where(cfg)})")
        return cfg
    say(f"{what} pid {cfg['pid']} does not answer; restarting it")
    service.stop(cfg)
    return None


def _s3_answers(s3: dict[str, Any]) -> bool:
    """The S3 server answers with the stack's key, and its bucket is there."""
    if not seaweedfs.probe(s3):
        return False
    seaweedfs.ensure_bucket(s3)
    return True


def s3_server(sd: Path, s3: dict[str, Any] | None) -> dict[str, Any]:
    if reused := _reused("S3 server", s3, seaweedfs, seaweedfs.endpoint, _s3_answers):
        return reused
    if s3 and Path(s3["credentials_file"]).is_file():
        say(f"starting existing S3 server on {seaweedfs.endpoint(s3)}")
    else:
        s3 = seaweedfs.configure(sd, procs.free_ports(len(seaweedfs.PORT_NAMES)))
        say(f"starting new S3 server (SeaweedFS) on {seaweedfs.endpoint(s3)}, bucket {s3['bucket']}")
    s3["pid"] = seaweedfs.start(s3)
    return s3


def schema_registry_server(sd: Path, sr: dict[str, Any] | None) -> dict[str, Any]:
    if reused := _reused("schema registry", sr, schema_registry, schema_registry.url, schema_registry.probe):
        return reused
    if sr and Path(sr["config"]).is_file():
        say(f"starting existing schema registry on {schema_registry.url(sr)}")
    else:
        app = jars.fetch_apicurio()
        sr = schema_registry.configure(sd, app, *procs.free_ports(2))
        say(f"starting new schema registry (Apicurio Registry {sr['version']}) on {schema_registry.url(sr)}")
    sr["pid"] = schema_registry.start(sr)
    return sr


def iceberg_rest_server(sd: Path, stack: dict[str, Any]) -> dict[str, Any]:
    """The Iceberg REST catalog, on the stack's PostgreSQL and S3 server (both started before it)."""
    ir: dict[str, Any] | None = stack.get("iceberg_rest")
    if reused := _reused("Iceberg REST catalog", ir, iceberg_rest, iceberg_rest.url, iceberg_rest.probe):
        return reused
    if ir and Path(ir["token_file"]).is_file():
        say(f"starting existing Iceberg REST catalog on {iceberg_rest.url(ir)}")
    else:
        app = jars.fetch_iceberg_rest()
        ir = iceberg_rest.configure(sd, app, procs.free_port(), stack["s3"])
        say(f"starting new Iceberg REST catalog (Apache Iceberg {ir['version']}) on {iceberg_rest.url(ir)}")
    ir["pid"] = iceberg_rest.start(ir, stack["postgres"], stack["s3"])
    return ir


def spark_cluster(sd: Path, sc: dict[str, Any] | None) -> dict[str, Any]:
    if sc and spark.is_running(sc) and spark.alive_workers(sc) > 0:
        say(f"Spark cluster already running ({sc['master_url']})")
        return sc
    sc = sc or spark.configure(sd)
    say(f"starting Spark standalone master + worker ({sc['master_url']})")
    return spark.start(sc)


def connect_server(sd: Path, stack: dict[str, Any]) -> dict[str, Any]:
    sc: dict[str, Any] | None = stack.get("spark_connect")
    if sc and spark_connect.is_running(sc) and procs.port_open(sc["port"], sc["host"]):
        say(f"Spark Connect server already running (pid {sc['pid']}, {sc['host']}:{sc['port']})")
        return sc
    if sc:
        spark_connect.stop(sc)
    else:
        sc = spark_connect.configure(sd, stack["connector_jars"], stack["s3a_jars"])
    say(f"starting Spark Connect server on {sc['host']}:{sc['port']}")
    sc["pid"] = spark_connect.start(sc)
    return sc


def line_version(spark_version: str | None) -> str | None:
    """The release a Connect server of another line runs; ``None`` for the default server (no
    version, or the worker's own pyspark release: the default server is that line's server)."""
    if spark_version is None:
        return None
    version = spark_lines.resolve(spark_version)
    return None if spark_lines.is_worker_version(version) else version


def connect_server_of_line(sd: Path, stack: dict[str, Any], version: str) -> dict[str, Any]:
    """Start (or reuse) the Connect server of one Spark release, recorded in ``spark_connect_lines``."""
    lines = stack.setdefault("spark_connect_lines", {})
    sc = lines.get(version)
    if sc and spark_connect.is_running(sc) and procs.port_open(sc["port"], sc["host"]):
        say(f"Spark {version} Connect server already running (pid {sc['pid']}, {sc['host']}:{sc['port']})")
        return dict(sc)
    if sc:
        spark_connect.stop(sc)
    else:
        home = spark_lines.spark_home(version)
        connector = [str(p) for p in (*jars.fetch_connector(version, spark_home=home), *jars.fetch_avro(version))]
        sc = spark_connect.configure(sd, connector, _s3a_jars_of_line(home, version), home, version)
    say(f"starting Spark {version} Connect server on {sc['host']}:{sc['port']} ({sc['spark_home']})")
    lines[version] = sc
    state.save(stack)  # the record first: `down` finds a server whose start failed half-way
    sc["pid"] = spark_connect.start(sc)
    return dict(sc)


def _s3a_jars_of_line(home: Path, version: str) -> list[str]:
    """The line's S3A jars, or none where the stack has none for it (Spark 3.5: AWS SDK v1)."""
    try:
        return [str(p) for p in jars.fetch_s3a(spark_home=home)]
    except StackError as exc:
        say(f"Spark {version} Connect server without S3A: {exc}")
        return []
