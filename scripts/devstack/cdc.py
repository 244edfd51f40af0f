"""A change data capture source for the stack: Debezium's PostgreSQL connector on Kafka Connect.

Kafka Connect runs standalone (``org.apache.kafka.connect.cli.ConnectStandalone``, what the Kafka
distribution's ``connect-standalone.sh`` runs) from jars Maven resolves (``scripts/jars/debezium-connect.xml``:
``connect-runtime`` of the stack's Kafka release and ``io.debezium:debezium-connector-postgres``),
with its REST interface on a free loopback port. The connector reads the stack's PostgreSQL (database
``cdc_source``, ``wal_level=logical``, the built-in ``pgoutput`` plugin, a publication of all tables)
and writes one topic per table, ``cdc.<schema>.<table>``, as JSON with the embedded schema.

A second connector on the same worker (its own slot and publication) writes the same changes as Avro
to ``cdcavro.<schema>.<table>``: values through Apicurio Registry's converter (Maven Central, as a Connect
plugin: ``scripts/jars/apicurio-converter.xml``) into the stack's schema registry, in the Confluent wire
format (magic byte 0 and the 4-byte id its Confluent-compatible API serves, ``apicurio.registry.as-confluent``);
keys Avro too, or JSON for the tables whose name starts with ``jsonkey_`` (a key converter per table is not a
Connect setting, so those go through a third connector, ``cdcjk.<schema>.<table>``).

The connector's settings hold the database password: they are a 0600 file in the state dir, never
the command line (Connect hides password settings in its log). Optional: only ``scripts/stack up
--cdc`` and the tests that need it start it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from . import jars, postgres, procs, state
from .errors import StackError, say

CONNECTOR = "ako-cdc"
DATABASE = "cdc_source"
TOPIC_PREFIX = "cdc"
SLOT = "ako_cdc"
# The Avro connectors: (name, topic prefix and slot, key converter); values are Avro in both.
AVRO_CONNECTORS = (
    ("ako-cdc-avro", "cdcavro", "avro"),
    ("ako-cdc-avro-jsonkey", "cdcjk", "json"),
)
AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
HEAP = os.environ.get("AKO_CONNECT_HEAP", "256m")
MAIN = "org.apache.kafka.connect.cli.ConnectStandalone"
LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.debezium.name = io.debezium
logger.debezium.level = INFO
"""


def topic(table: str, schema: str = "public", prefix: str = TOPIC_PREFIX) -> str:
    """The topic Debezium writes a table's changes to (``prefix``: ``cdcavro`` or ``cdcjk`` for Avro values)."""
    return f"{prefix}.{schema}.{table}"


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    tmp.replace(path)


def _properties(values: dict[str, str]) -> str:
    return "# written by scripts/devstack/cdc.py\n" + "".join(f"{k}={v}\n" for k, v in values.items())


def ensure_logical_decoding(pg: dict[str, Any]) -> None:
    """PostgreSQL with ``wal_level=logical``: a stack made before it had it is switched (a restart)."""
    conn = postgres.connect(pg, dbname="postgres")
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SHOW wal_level")
            if cur.fetchone()[0] == "logical":
                return
            cur.execute("ALTER SYSTEM SET wal_level = logical")
    finally:
        conn.close()
    say("PostgreSQL: wal_level=logical for the CDC source (restarting it)")
    postgres.stop(pg)
    pg["pid"] = postgres.start(pg)


def _avro_converter(side: str, registry: dict[str, Any], password: str) -> dict[str, str]:
    """A connector's converter settings for Avro ``side`` (key or value) in the Confluent wire format, through
    Apicurio's converter (its 2.x client speaks the registry's v2 API; the id written is the content id the
    Confluent-compatible API serves)."""
    p = f"{side}.converter"
    return {
        p: AVRO_CONVERTER,
        f"{p}.apicurio.registry.url": f"http://{registry['host']}:{registry['port']}/apis/registry/v2",
        f"{p}.apicurio.auth.username": str(registry["user"]),
        f"{p}.apicurio.auth.password": password,
        f"{p}.apicurio.registry.auto-register": "true",
        f"{p}.apicurio.registry.find-latest": "true",
        f"{p}.apicurio.registry.as-confluent": "true",
        f"{p}.apicurio.registry.use-id": "contentId",
        f"{p}.apicurio.registry.headers.enabled": "false",
    }


def _avro_connectors(base: Path, connector: dict[str, str], registry: dict[str, Any]) -> list[str]:
    """The Avro connectors' settings files (0600: database and registry passwords) beside the JSON one's."""
    password = Path(registry["password_file"]).read_text().strip()
    files = []
    for name, prefix, key in AVRO_CONNECTORS:
        slot = f"{SLOT}_{prefix}"
        keys = _avro_converter("key", registry, password) if key == "avro" else {"key.converter": JSON_CONVERTER}
        settings = {**connector, "name": name, "topic.prefix": prefix, "slot.name": slot, "publication.name": slot}
        settings |= keys | _avro_converter("value", registry, password)
        if key == "json":  # only the tables of the JSON-key tests: the other tables' changes are not wanted there
            settings["table.include.list"] = "public.jsonkey_.*"
        path = base / f"connector-{prefix}.properties"
        _write_private(path, _properties(settings))
        files.append(str(path))
    return files


def configure(sd: Path, stack: dict[str, Any], libs: Path, port: int, converter: Path | None = None) -> dict[str, Any]:
    """The worker's and the connectors' settings in ``<state>/cdc``; returns the config record. With
    ``converter`` (the plugin path of Apicurio's converter) and a schema registry in the stack, the Avro
    connectors too."""
    base = sd / "cdc"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(mode=0o700)
    pg, kafka = stack["postgres"], stack["kafka"]
    cfg: dict[str, Any] = {
        "host": state.LOOPBACK,
        "port": port,
        "libs": str(libs),
        "base_dir": str(base),
        "worker": str(base / "worker.properties"),
        "connector": str(base / "connector.properties"),
        "log4j": str(base / "log4j2.properties"),
        "stdout": str(base / "connect.out"),
        "database": DATABASE,
        "topic_prefix": TOPIC_PREFIX,
    }
    worker = {
        "bootstrap.servers": f"{kafka['host']}:{kafka['port']}",
        "listeners": f"http://{state.LOOPBACK}:{port}",
        "rest.advertised.host.name": state.LOOPBACK,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.storage.file.filename": str(base / "offsets"),
        "offset.flush.interval.ms": "1000",
        "plugin.discovery": "only_scan",
    }
    connector = {
        "name": CONNECTOR,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": pg["host"],
        "database.port": str(pg["port"]),
        "database.user": pg["user"],
        "database.password": Path(pg["password_file"]).read_text().strip(),
        "database.dbname": DATABASE,
        "topic.prefix": TOPIC_PREFIX,
        "slot.name": SLOT,
        "publication.name": SLOT,
        "publication.autocreate.mode": "all_tables",
        "snapshot.mode": "initial",
        "poll.interval.ms": "100",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "2",
    }
    registry = stack.get("schema_registry")
    if registry and converter is not None:
        worker["plugin.path"] = str(converter)
        cfg["avro_connectors"] = _avro_connectors(base, connector, registry)
    Path(cfg["worker"]).write_text(_properties(worker))
    _write_private(Path(cfg["connector"]), _properties(connector))
    Path(cfg["log4j"]).write_text(LOG4J)
    return cfg


def _marker(cfg: dict[str, Any]) -> str:
    return f"-Dako.stack.dir={cfg['base_dir']}"


def _argv(cfg: dict[str, Any]) -> list[str]:
    java = procs.require_tool("java", "install a JDK 17, e.g. apt-get install openjdk-17-jdk-headless")
    return [
        java,
        f"-Xmx{HEAP}",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # a short-lived dev service: C1 only, a faster start
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={cfg['log4j']}",
        _marker(cfg),
        "-cp",
        f"{cfg['libs']}/*",
        MAIN,
        cfg["worker"],
        cfg["connector"],
        *cfg.get("avro_connectors", []),
    ]


def connectors(cfg: dict[str, Any]) -> list[str]:
    """The worker's connectors: the JSON one, and the Avro ones on a stack with a schema registry."""
    return [CONNECTOR, *(name for name, _, _ in AVRO_CONNECTORS if cfg.get("avro_connectors"))]


def status(cfg: dict[str, Any], timeout: float = 3.0, connector: str = CONNECTOR) -> dict[str, Any] | None:
    """A connector's status from Connect's REST interface (None: nothing answers yet)."""
    url = f"http://{cfg['host']}:{cfg['port']}/connectors/{connector}/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            found: dict[str, Any] = json.loads(response.read())
            return found
    except (urllib.error.URLError, OSError, ValueError):
        return None


def running(found: dict[str, Any] | None) -> bool:
    """The connector and one of its tasks run (what a status answer says)."""
    if not found:
        return False
    tasks = found.get("tasks") or []
    return bool(found["connector"]["state"] == "RUNNING" and any(t["state"] == "RUNNING" for t in tasks))


def start(cfg: dict[str, Any], timeout: float = 180) -> int:
    """Start Kafka Connect detached and wait until the connector's task runs; return its pid."""
    procs.ensure_port_free(cfg["port"], "Kafka Connect", wait_s=10)
    started = time.monotonic()
    pid = procs.spawn_detached(_argv(cfg), Path(cfg["stdout"]), cwd=Path(cfg["base_dir"]))
    deadline = started + timeout
    while not all(running(found := status(cfg, connector=name)) for name in connectors(cfg)):
        failed = [t for t in (found or {}).get("tasks") or [] if t["state"] == "FAILED"]
        if failed or not procs.pid_alive(pid):
            procs.terminate(pid, marker=_marker(cfg), timeout=10)
            trace = failed[0].get("trace", "")[:2000] if failed else procs.tail(cfg["stdout"])
            raise StackError(f"Kafka Connect with Debezium did not start (pid {pid}):\n{trace}")
        if time.monotonic() > deadline:
            procs.terminate(pid, marker=_marker(cfg), timeout=10)
            raise StackError(f"Kafka Connect with Debezium not running after {timeout:.0f}s; see {cfg['stdout']}")
        time.sleep(0.25)
    cfg["start_s"] = round(time.monotonic() - started, 1)
    say(f"Kafka Connect with Debezium's PostgreSQL connector running in {cfg['start_s']}s (pid {pid})")
    return pid


def stop(cfg: dict[str, Any], hard: bool = False, timeout: float = 30) -> None:
    procs.terminate(cfg.get("pid"), marker=_marker(cfg), timeout=timeout, kill=hard)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), marker=_marker(cfg))


def ensure(sd: Path, stack: dict[str, Any]) -> dict[str, Any]:
    """Start (or reuse) the CDC source of a running stack: its database, logical decoding, Kafka Connect."""
    cfg: dict[str, Any] | None = stack.get("cdc")
    avro = bool(stack.get("schema_registry"))  # a worker started without the Avro connectors is restarted
    current = cfg is not None and bool(cfg.get("avro_connectors")) == avro and is_running(cfg)
    if cfg is not None and current and all(running(status(cfg, connector=name)) for name in connectors(cfg)):
        say(f"Kafka Connect with Debezium already running (pid {cfg['pid']}, port {cfg['port']})")
        return cfg
    if cfg:
        stop(cfg, hard=True)
    pg = stack["postgres"]
    ensure_logical_decoding(pg)
    postgres.ensure_database(pg, DATABASE)
    converter = jars.fetch_apicurio_converter() if avro else None
    cfg = configure(sd, stack, jars.fetch_debezium(), procs.free_port(), converter)
    cfg["pid"] = start(cfg)
    return cfg
