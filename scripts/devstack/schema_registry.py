"""A schema registry for the stack: Apicurio Registry 3 (its Confluent-compatible API) on a JDK 21+.

The application is Apicurio's own release build, fetched from Maven Central (``jars.fetch_apicurio``)
and run as it ships (``java -jar quarkus-app/quarkus-run.jar``) on 127.0.0.1, on two free ports: the
API and Quarkus's management interface (health checks). Clients use the Confluent Schema Registry
REST API it serves at ``/apis/ccompat/v7`` (subjects, versions, ``schemas/ids/{id}``,
compatibility). Its storage is Apicurio's SQL storage on an embedded H2 database file in the state
dir, so schema ids stay valid across restarts, like the Kafka records that carry them. Every API
call needs HTTP basic auth as the one user ``ako``, whose password is generated once per stack
(``<state>/schema-registry-password``, 0600). The global compatibility rule is BACKWARD, the
default of Confluent's registry (Apicurio's own default is none).

Quarkus reads the settings from ``config/application.properties`` in the working directory (0600;
it holds the password's digest, never the password): nothing secret is on the command line.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from . import jars, procs, state, tls
from .errors import StackError

USER = "ako"
PASSWORD_FILE = "schema-registry-password"
CCOMPAT_PATH = "/apis/ccompat/v7"
REALM = "Quarkus"  # quarkus.security.users.embedded.realm-name's default: part of the password digest
DIGEST = "digest-sha-512"  # quarkus.security.users.embedded.algorithm (its default in Quarkus 3.33)
GLOBAL_COMPATIBILITY = "BACKWARD"
HEAP = os.environ.get("AKO_REGISTRY_HEAP", "256m")
JAVA_ENV = "AKO_REGISTRY_JAVA"
MIN_JAVA = 21
JVM_DIR = Path("/usr/lib/jvm")
_JAVA_VERSION_RE = re.compile(r'^JAVA_VERSION="(?P<major>\d+)', re.MULTILINE)


def java_major(java: str | Path) -> int | None:
    """The feature release of a ``java`` binary, from its JDK's ``release`` file (None if unknown)."""
    home = Path(os.path.realpath(java)).parent.parent
    try:
        m = _JAVA_VERSION_RE.search((home / "release").read_text())
    except OSError:
        return None
    return int(m.group("major")) if m else None


def java_binary() -> str:
    """A ``java`` of release 21 or newer: ``$AKO_REGISTRY_JAVA``, else the one on PATH, else the newest
    JDK under /usr/lib/jvm."""
    explicit = os.environ.get(JAVA_ENV)
    if explicit:
        major = java_major(explicit)
        if major is None or major < MIN_JAVA:
            raise StackError(f"{JAVA_ENV}={explicit} is not a java of release {MIN_JAVA}+ (found: {major})")
        return explicit
    on_path = shutil.which("java")
    if on_path and (java_major(on_path) or 0) >= MIN_JAVA:
        return on_path
    found = sorted(
        ((java_major(p) or 0, str(p)) for p in JVM_DIR.glob("*/bin/java") if p.is_file()),
        reverse=True,
    )
    if found and found[0][0] >= MIN_JAVA:
        return found[0][1]
    seen = ", ".join(f"{path} ({major or '?'})" for major, path in found) or "none"
    raise StackError(
        f"Apicurio Registry {jars.APICURIO_VERSION} needs Java {MIN_JAVA} or newer; java on PATH is "
        f"{java_major(on_path) if on_path else 'missing'}, JDKs under {JVM_DIR}: {seen}. Install one "
        f"(e.g. apt-get install openjdk-21-jre-headless) or set {JAVA_ENV} to its bin/java"
    )


def password(cfg: dict[str, Any]) -> str:
    return Path(cfg["password_file"]).read_text().strip()


def url(cfg: dict[str, Any]) -> str:
    """The Confluent-compatible API's base URL, what Confluent clients take as ``url``."""
    return f"http://{cfg['host']}:{cfg['port']}{CCOMPAT_PATH}"


def configure(sd: Path, app_dir: Path, port: int, management_port: int) -> dict[str, Any]:
    """Create the registry's directories, password and settings; return the config record."""
    base = sd / "schema-registry"
    if base.exists():
        shutil.rmtree(base)
    for sub in ("config", "data", "logs", "tmp"):
        (base / sub).mkdir(parents=True)
    os.chmod(base / "config", 0o700)
    tls.write_secret(sd / PASSWORD_FILE)
    cfg: dict[str, Any] = {
        "host": state.LOOPBACK,
        "port": port,
        "management_port": management_port,
        "version": jars.APICURIO_VERSION,
        "app_dir": str(app_dir),
        "base_dir": str(base),
        "data_dir": str(base / "data"),
        "config": str(base / "config" / "application.properties"),
        "stdout": str(base / "logs" / "registry.out"),
        "user": USER,
        "password_file": str(sd / PASSWORD_FILE),
    }
    write_config(cfg)
    return cfg


def password_digest(user: str, secret: str, realm: str = REALM) -> str:
    """What Quarkus's embedded users take instead of a plain password (algorithm ``digest-sha-512``):
    hex SHA-512 of ``user:realm:password``."""
    return hashlib.sha512(f"{user}:{realm}:{secret}".encode()).hexdigest()


def settings(cfg: dict[str, Any]) -> dict[str, str]:
    """The registry's ``config/application.properties`` for a config record."""
    base, h = cfg["base_dir"], cfg["host"]
    return {
        "quarkus.http.host": h,
        "quarkus.http.port": str(cfg["port"]),
        "quarkus.management.host": h,
        "quarkus.management.port": str(cfg["management_port"]),
        # SQL storage on an H2 file (the default is an in-memory H2 database, lost on every restart)
        "apicurio.storage.kind": "sql",
        "apicurio.storage.sql.kind": "h2",
        "apicurio.datasource.url": f"jdbc:h2:file:{cfg['data_dir']}/registry",
        "apicurio.datasource.jdbc.initial-size": "2",
        "apicurio.datasource.jdbc.min-size": "2",
        "apicurio.datasource.jdbc.max-size": "20",
        "apicurio.storage.snapshot.location": f"{base}/tmp",
        "apicurio.import.work-dir": f"{base}/tmp",
        "apicurio.rules.global.compatibility": GLOBAL_COMPATIBILITY,
        # HTTP basic auth against Quarkus's embedded users (Quarkus warns that quarkus.http.auth.basic is
        # fixed at build time: Apicurio reads it itself to put basic auth in its chain, which works)
        "quarkus.http.auth.basic": "true",
        "apicurio.authn.mechanism.priority": "basic",
        "quarkus.security.users.embedded.plain-text": "false",
        "quarkus.security.users.embedded.algorithm": DIGEST,
        f"quarkus.security.users.embedded.users.{cfg['user']}": password_digest(cfg["user"], password(cfg)),
        f"quarkus.security.users.embedded.roles.{cfg['user']}": "sr-admin",
    }


def write_config(cfg: dict[str, Any]) -> None:
    """(Re)write the settings file, private (0600)."""
    path = Path(cfg["config"])
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("# written by scripts/devstack/schema_registry.py\n")
        fh.write("".join(f"{k}={v}\n" for k, v in settings(cfg).items()))
    tmp.replace(path)


def _argv(cfg: dict[str, Any]) -> list[str]:
    return [
        java_binary(),
        f"-Xmx{HEAP}",
        "-XX:+UseSerialGC",
        "-Djava.awt.headless=true",
        f"-Djava.io.tmpdir={cfg['base_dir']}/tmp",
        f"-Dako.stack.dir={cfg['base_dir']}",  # the marker that tells our process from a recycled pid
        "-jar",
        f"{cfg['app_dir']}/quarkus-run.jar",
    ]


def start(cfg: dict[str, Any], timeout: float = 120) -> int:
    """Start the registry detached and wait until its API answers the stack's user; return its pid."""
    procs.ensure_port_free(cfg["port"], "schema registry", wait_s=10)
    procs.ensure_port_free(cfg["management_port"], "schema registry (management)", wait_s=10)
    if not (Path(cfg["app_dir"]) / "quarkus-run.jar").is_file():  # a cache cleared since `up`
        jars.fetch_apicurio(cfg["version"])
    write_config(cfg)
    pid = procs.spawn_detached(_argv(cfg), Path(cfg["stdout"]), cwd=Path(cfg["base_dir"]))
    try:
        wait_ready(cfg, pid, timeout)
    except StackError:
        procs.terminate(pid, marker=_marker(cfg), timeout=10)
        raise
    return pid


def wait_ready(cfg: dict[str, Any], pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe(cfg):
        if not procs.pid_alive(pid):
            raise StackError(
                f"the schema registry (pid {pid}) exited; tail of {cfg['stdout']}:\n{procs.tail(cfg['stdout'])}"
            )
        if time.monotonic() > deadline:
            raise StackError(
                f"the schema registry did not answer on {url(cfg)} within {timeout:.0f}s; "
                f"tail of {cfg['stdout']}:\n{procs.tail(cfg['stdout'])}"
            )
        time.sleep(0.3)


def probe(cfg: dict[str, Any], timeout: float = 3.0) -> bool:
    """True if ``GET /subjects`` answers 200 to the stack's user."""
    return request(cfg, "GET", "/subjects", timeout=timeout)[0] == 200


def request(
    cfg: dict[str, Any], method: str, path: str, body: bytes | None = None, timeout: float = 10.0
) -> tuple[int, bytes]:
    """One call to the Confluent-compatible API as the stack's user: (HTTP status, body); (0, b"") when
    nothing answers."""
    token = base64.b64encode(f"{cfg['user']}:{password(cfg)}".encode()).decode()
    headers = {"Authorization": f"Basic {token}", "Accept": "application/vnd.schemaregistry.v1+json"}
    if body is not None:
        headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
    req = urllib.request.Request(url(cfg) + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def _marker(cfg: dict[str, Any]) -> str:
    return f"-Dako.stack.dir={cfg['base_dir']}"


def stop(cfg: dict[str, Any], hard: bool = False, timeout: float = 30) -> None:
    """SIGTERM (Quarkus shuts down and closes the H2 file), SIGKILL after ``timeout``; ``hard`` kills at once."""
    procs.terminate(cfg.get("pid"), marker=_marker(cfg), timeout=timeout, kill=hard)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), marker=_marker(cfg))


def rss_bytes(cfg: dict[str, Any]) -> int | None:
    """The running server's resident memory (None when it does not run)."""
    return procs.rss_bytes(cfg.get("pid"), _marker(cfg))
