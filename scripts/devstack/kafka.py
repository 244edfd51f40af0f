"""A single-node Kafka 4.x KRaft broker (combined broker+controller) run from cached jars."""

from __future__ import annotations

import base64
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from . import procs, state, tls
from .errors import StackError
from .kafka_probe import probe

MAIN_CLASS = "kafka.Kafka"
HEAP = os.environ.get("AKO_KAFKA_HEAP", "512m")
# The SASL_PLAINTEXT listener (mechanism PLAIN) has one user; its password is
# generated once per stack and kept 0600 in the state dir, like PostgreSQL's.
SASL_USER = "ako"
SASL_PASSWORD_FILE = "kafka-sasl-password"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# The SASL_SSL listener (TLS with the stack's own CA, see tls.py; mechanism SCRAM-SHA-512), as
# production clusters run it. Its user is a SCRAM credential in the cluster metadata, created through
# Kafka's admin API after the first start; its password is generated per stack, 0600.
SCRAM_USER = "ako-scram"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_PASSWORD_FILE = "kafka-scram-password"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def new_cluster_id() -> str:
    """A Kafka cluster id: url-safe base64 of a random UUID (never starting with '-')."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def sasl_password(sd: Path) -> str:
    """The SASL/PLAIN user's password, generated once per state dir and kept 0600."""
    return tls.write_secret(sd / SASL_PASSWORD_FILE)


def scram_password(sd: Path) -> str:
    """The SCRAM user's password (SASL_SSL listener), generated once per state dir and kept 0600."""
    return tls.write_secret(sd / SCRAM_PASSWORD_FILE)


def configure(
    sd: Path,
    libs_dir: Path,
    port: int,
    controller_port: int,
    sasl_port: int | None = None,
    sasl_ssl_port: int | None = None,
    proxied_backend_port: int | None = None,
    proxied_port: int | None = None,
) -> dict[str, Any]:
    """Write server.properties + log4j2.properties; return the config record.

    ``proxied_backend_port``/``proxied_port`` add the PLAINTEXT listener for the fault proxy; see
    :func:`enable_proxied`.

    ``sasl_port`` adds a SASL_PLAINTEXT listener (mechanism PLAIN) beside the
    PLAINTEXT one; see :func:`enable_sasl`. ``sasl_ssl_port`` adds a SASL_SSL listener
    (mechanism SCRAM-SHA-512, the stack's CA); see :func:`enable_sasl_ssl`.
    """
    base = sd / "kafka"
    if base.exists():
        shutil.rmtree(base)
    (base / "logs").mkdir(parents=True)
    cfg: dict[str, Any] = {
        "host": state.LOOPBACK,
        "port": port,
        "controller_port": controller_port,
        "cluster_id": new_cluster_id(),
        "libs_dir": str(libs_dir),
        "base_dir": str(base),
        "config": str(base / "server.properties"),
        "log_dirs": str(base / "data"),
        "log": str(base / "logs" / "server.log"),
        "stdout": str(base / "logs" / "kafka.out"),
    }
    if sasl_port is not None:
        _sasl_fields(cfg, sd, sasl_port)
    if sasl_ssl_port is not None:
        _sasl_ssl_fields(cfg, sd, sasl_ssl_port)
    if proxied_backend_port is not None and proxied_port is not None:
        cfg.update({"proxied_backend_port": proxied_backend_port, "proxied_port": proxied_port})
    write_config(cfg)
    (base / "log4j2.properties").write_text(LOG4J2.format(log=cfg["log"]))
    return cfg


def has_sasl(cfg: dict[str, Any]) -> bool:
    """True if the broker config record has the SASL_PLAINTEXT listener."""
    return bool(cfg.get("sasl_port"))


def enable_sasl(cfg: dict[str, Any], sd: Path, sasl_port: int) -> dict[str, Any]:
    """Add the SASL_PLAINTEXT listener to an existing broker's config (restart it to apply).

    Listeners are not part of the KRaft metadata (static quorum), so the data dir stays valid.
    """
    _sasl_fields(cfg, sd, sasl_port)
    write_config(cfg)
    return cfg


def _sasl_fields(cfg: dict[str, Any], sd: Path, sasl_port: int) -> None:
    sasl_password(sd)  # create it now, so the broker config and clients agree
    cfg.update(
        {
            "sasl_port": sasl_port,
            "sasl_mechanism": "PLAIN",
            "sasl_user": SASL_USER,
            "sasl_password_file": str(sd / SASL_PASSWORD_FILE),
        }
    )


def has_proxied(cfg: dict[str, Any]) -> bool:
    """True if the broker has the listener for the fault proxy (devstack.toxiproxy)."""
    return bool(cfg.get("proxied_port"))


def enable_proxied(cfg: dict[str, Any], backend_port: int, advertised_port: int) -> dict[str, Any]:
    """Add the PROXIED listener (PLAINTEXT on ``backend_port``, advertising ``advertised_port``: where
    toxiproxy listens, relaying to ``backend_port``) to an existing broker's config (restart it to apply).
    A client that bootstraps through the proxy is told to reach the broker through the proxy again."""
    cfg.update({"proxied_backend_port": backend_port, "proxied_port": advertised_port})
    write_config(cfg)
    return cfg


def has_sasl_ssl(cfg: dict[str, Any]) -> bool:
    """True if the broker config record has the SASL_SSL listener."""
    return bool(cfg.get("sasl_ssl_port"))


def enable_sasl_ssl(cfg: dict[str, Any], sd: Path, sasl_ssl_port: int) -> dict[str, Any]:
    """Add the SASL_SSL listener to an existing broker's config (restart it to apply; :func:`start`
    then creates the SCRAM user)."""
    _sasl_ssl_fields(cfg, sd, sasl_ssl_port)
    write_config(cfg)
    return cfg


def _sasl_ssl_fields(cfg: dict[str, Any], sd: Path, sasl_ssl_port: int) -> None:
    scram_password(sd)
    cfg.update(
        {
            "sasl_ssl_port": sasl_ssl_port,
            "sasl_ssl_mechanism": SCRAM_MECHANISM,
            "sasl_ssl_user": SCRAM_USER,
            "sasl_ssl_password_file": str(sd / SCRAM_PASSWORD_FILE),
            "sasl_ssl_user_created": False,
            **tls.ensure(sd),
        }
    )


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def server_properties(cfg: dict[str, Any]) -> dict[str, str]:
    """The broker's server.properties for a config record."""
    h, port, controller_port = state.LOOPBACK, cfg["port"], cfg["controller_port"]
    listeners = [f"PLAINTEXT://{h}:{port}", f"CONTROLLER://{h}:{controller_port}"]
    advertised = [f"PLAINTEXT://{h}:{port}"]
    protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
    sasl: dict[str, str] = {}
    if has_sasl(cfg):
        listeners.append(f"SASL_PLAINTEXT://{h}:{cfg['sasl_port']}")
        advertised.append(f"SASL_PLAINTEXT://{h}:{cfg['sasl_port']}")
        protocols.append("SASL_PLAINTEXT:SASL_PLAINTEXT")
        password = Path(cfg["sasl_password_file"]).read_text().strip()
        sasl = {
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            # broker side of PLAIN: one user_<name>="<password>" entry per accepted client
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"{PLAIN_LOGIN_MODULE} required user_{cfg['sasl_user']}={_jaas_quote(password)};"
            ),
        }
    if has_proxied(cfg):
        listeners.append(f"PROXIED://{h}:{cfg['proxied_backend_port']}")
        advertised.append(f"PROXIED://{h}:{cfg['proxied_port']}")
        protocols.append("PROXIED:PLAINTEXT")
    if has_sasl_ssl(cfg):
        listeners.append(f"SASL_SSL://{h}:{cfg['sasl_ssl_port']}")
        advertised.append(f"SASL_SSL://{h}:{cfg['sasl_ssl_port']}")
        protocols.append("SASL_SSL:SASL_SSL")
        keystore_password = Path(cfg["ssl_keystore_password_file"]).read_text().strip()
        mechanism = cfg["sasl_ssl_mechanism"]
        sasl.update(
            {
                "listener.name.sasl_ssl.sasl.enabled.mechanisms": mechanism,
                # SCRAM users live in the cluster metadata; the broker's login module takes no options
                f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required;",
                "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
                "listener.name.sasl_ssl.ssl.keystore.location": cfg["ssl_keystore_file"],
                "listener.name.sasl_ssl.ssl.keystore.password": keystore_password,
                "listener.name.sasl_ssl.ssl.key.password": keystore_password,
                "listener.name.sasl_ssl.ssl.client.auth": "none",
            }
        )
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        # Static quorum: no endpoint is baked into the metadata log, so the broker
        # can be restarted from its config alone. (The dynamic alternative is
        # controller.quorum.bootstrap.servers + `StorageTool format --standalone`.)
        "controller.quorum.voters": f"1@{h}:{controller_port}",
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(protocols),
        **sasl,
        "log.dirs": cfg["log_dirs"],
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # short housekeeping intervals so retention/compaction tests finish quickly
        "log.retention.check.interval.ms": "5000",
        "log.initial.task.delay.ms": "1000",  # default 30 s before the first retention check
        "log.segment.delete.delay.ms": "1000",
        "log.cleaner.enable": "true",
        "log.cleaner.threads": "1",
        "log.cleaner.backoff.ms": "1000",
        "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "4",
    }


def write_config(cfg: dict[str, Any]) -> None:
    """(Re)write server.properties, private (0600): it holds the SASL user's and the key store's passwords."""
    path = Path(cfg["config"])
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("".join(f"{k}={v}\n" for k, v in server_properties(cfg).items()))
    tmp.replace(path)


def _java_cmd(cfg: dict[str, Any], main: str, *args: str, heap: str | None = None) -> list[str]:
    java = procs.require_tool("java", "install a JDK 17, e.g. apt-get install openjdk-17-jre-headless")
    opts = [f"-Xmx{heap}", f"-Xms{heap}"] if heap else ["-Xmx256m"]
    return [
        java,
        *opts,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={cfg['base_dir']}/log4j2.properties",
        f"-Dkafka.logs.dir={cfg['base_dir']}/logs",
        f"-Dako.stack.dir={cfg['base_dir']}",
        "-cp",
        f"{cfg['libs_dir']}/*",
        main,
        *args,
    ]


def format_storage(cfg: dict[str, Any]) -> None:
    """``kafka.tools.StorageTool format`` once per data dir (static quorum: no --standalone)."""
    if (Path(cfg["log_dirs"]) / "meta.properties").exists():
        return
    procs.run(
        _java_cmd(cfg, "kafka.tools.StorageTool", "format", "-t", cfg["cluster_id"], "-c", cfg["config"]),
        "kafka-storage format",
        cwd=cfg["base_dir"],
        timeout=120,
    )


def start(cfg: dict[str, Any], timeout: float = 90) -> int:
    """Start the broker detached and wait until it serves metadata; return its pid."""
    procs.ensure_port_free(cfg["port"], "Kafka")
    procs.ensure_port_free(cfg["controller_port"], "Kafka controller")
    if has_sasl(cfg):
        procs.ensure_port_free(cfg["sasl_port"], "Kafka SASL_PLAINTEXT listener")
    if has_sasl_ssl(cfg):
        procs.ensure_port_free(cfg["sasl_ssl_port"], "Kafka SASL_SSL listener")
    if has_proxied(cfg):
        procs.ensure_port_free(cfg["proxied_backend_port"], "Kafka PROXIED listener")
    format_storage(cfg)
    pid = procs.spawn_detached(
        _java_cmd(cfg, MAIN_CLASS, cfg["config"], heap=HEAP), Path(cfg["stdout"]), cwd=Path(cfg["base_dir"])
    )
    if not wait_ready(cfg, pid, timeout):
        procs.terminate(pid, marker=cfg["config"], timeout=10)
        raise StackError(
            f"Kafka broker did not answer on {cfg['host']}:{cfg['port']} within "
            f"{timeout:.0f}s; tail of {cfg['log']}:\n{procs.tail(cfg['log'])}"
        )
    if has_sasl_ssl(cfg):
        try:
            _wait_tls(cfg, timeout=30)
            if not cfg.get("sasl_ssl_user_created"):
                create_scram_user(cfg)
        except StackError:
            procs.terminate(pid, marker=cfg["config"], timeout=10)
            raise
    return pid


def _wait_tls(cfg: dict[str, Any], timeout: float) -> None:
    """Wait until the SASL_SSL listener completes a TLS handshake verified against the stack's CA."""
    deadline = time.monotonic() + timeout
    while not tls.handshake(cfg["host"], cfg["sasl_ssl_port"], cfg["ssl_ca_file"]):
        if time.monotonic() > deadline:
            raise StackError(
                f"Kafka's SASL_SSL listener {cfg['host']}:{cfg['sasl_ssl_port']} did not complete a TLS handshake "
                f"verified by {cfg['ssl_ca_file']} within {timeout:.0f}s; tail of {cfg['log']}:\n"
                f"{procs.tail(cfg['log'])}"
            )
        time.sleep(0.5)


def create_scram_user(cfg: dict[str, Any]) -> None:
    """Create (or reset) the SCRAM user through Kafka's admin API (``kafka-configs --alter``, over the
    PLAINTEXT listener). The password goes in a 0600 file (``--add-config-file``), never on argv."""
    config_file = Path(cfg["ssl_dir"]) / "scram-user.properties"
    config_file.unlink(missing_ok=True)
    password = Path(cfg["sasl_ssl_password_file"]).read_text().strip()
    fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{cfg['sasl_ssl_mechanism']}=password={password}\n")  # no [...] in a file
    try:
        procs.run(
            _java_cmd(
                cfg,
                "kafka.admin.ConfigCommand",
                "--bootstrap-server",
                f"{cfg['host']}:{cfg['port']}",
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                cfg["sasl_ssl_user"],
                "--add-config-file",
                str(config_file),
            ),
            "kafka-configs (SCRAM user)",
            cwd=cfg["base_dir"],
            timeout=120,
        )
    except StackError as exc:  # the tool may quote the property it refused
        raise StackError(str(exc).replace(password, "<password>")) from None
    finally:
        config_file.unlink(missing_ok=True)
    cfg["sasl_ssl_user_created"] = True


def wait_ready(cfg: dict[str, Any], pid: int, timeout: float) -> bool:
    """Poll :func:`probe` until the broker answers (True) or ``timeout`` passes (False).

    Raises with the log tail if the process dies meanwhile.
    """
    deadline = time.monotonic() + timeout
    while True:
        if not procs.pid_alive(pid):
            raise StackError(
                f"Kafka broker (pid {pid}) exited; tail of {cfg['log']}:\n"
                f"{procs.tail(cfg['log'])}\n--- {cfg['stdout']}:\n"
                f"{procs.tail(cfg['stdout'], 15)}"
            )
        if probe(cfg["host"], cfg["port"]):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def stop(cfg: dict[str, Any], hard: bool = False, timeout: float = 30) -> None:
    """SIGTERM (controlled shutdown), SIGKILL after ``timeout``; ``hard`` kills at once."""
    procs.terminate(cfg.get("pid"), marker=cfg["config"], timeout=timeout, kill=hard)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), marker=cfg["config"])
