"""An Iceberg REST catalog for the stack: Apache Iceberg's own REST catalog server (1.10).

Iceberg publishes its REST catalog server only as test fixtures (``RESTCatalogServer`` in
``iceberg-open-api``'s, the adapter and servlet in ``iceberg-core``'s test jar), without a runnable
jar: ``jars.fetch_iceberg_rest`` resolves them with their dependencies and compiles the stack's
launcher (``java/org/apache/iceberg/rest/LoopbackRESTCatalogServer.java``). The launcher builds the
backend catalog and the servlet as ``RESTCatalogServer`` does, but listens on 127.0.0.1 only, never
logs the catalog's properties (``RESTCatalogServer`` logs them, secrets included), and checks
credentials: ``RESTCatalogServer`` has no authentication (its token endpoint accepts any client),
so the launcher answers the OAuth2 client-credentials grant only for the stack's client and secret,
and every other request needs the bearer token that grant returns.

The backend is Iceberg's JDBC catalog in its own database (``iceberg_rest``) of the stack's
PostgreSQL; table files go to the stack's S3 server through S3FileIO, under
``s3://<bucket>/iceberg-rest``, or to local disk (HadoopFileIO) for a table created with a ``file:``
location, ResolvingFileIO picking by the location. With ``include-credentials`` the server vends the S3 key to clients
in each table's config, as catalogs with credential vending do. The catalog's settings reach the
server as ``CATALOG_*`` environment variables (read as ``RESTCatalogServer`` reads them), the
client secret and the token as ``AKO_REST_*`` ones: nothing secret is on its command line.
"""

from __future__ import annotations

import os
import secrets
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from . import jars, postgres, procs, seaweedfs, state, tls
from .errors import StackError

DATABASE = "iceberg_rest"
CLIENT_ID = "ako"
SECRET_FILE = "iceberg-rest-client-secret"
TOKEN_FILE = "iceberg-rest-token"
WAREHOUSE_PREFIX = "iceberg-rest"
HEAP = os.environ.get("AKO_ICEBERG_REST_HEAP", "192m")
MAIN = "org.apache.iceberg.rest.LoopbackRESTCatalogServer"


def url(cfg: dict[str, Any]) -> str:
    """The catalog's base URI, what REST clients take as ``uri``."""
    return f"http://{cfg['host']}:{cfg['port']}"


def client_secret(cfg: dict[str, Any]) -> str:
    return Path(cfg["client_secret_file"]).read_text().strip()


def token(cfg: dict[str, Any]) -> str:
    return Path(cfg["token_file"]).read_text().strip()


def configure(sd: Path, app_dir: Path, port: int, s3: dict[str, Any]) -> dict[str, Any]:
    """Create the server's directories, client secret and token; return the config record."""
    base = sd / "iceberg-rest"
    if base.exists():
        shutil.rmtree(base)
    (base / "logs").mkdir(parents=True)
    tls.write_secret(sd / SECRET_FILE)
    tls.write_secret(sd / TOKEN_FILE, secrets.token_urlsafe(32))
    return {
        "host": state.LOOPBACK,
        "port": port,
        "version": jars.ICEBERG_REST_VERSION,
        "app_dir": str(app_dir),
        "base_dir": str(base),
        "stdout": str(base / "logs" / "server.out"),
        "client_id": CLIENT_ID,
        "client_secret_file": str(sd / SECRET_FILE),
        "token_file": str(sd / TOKEN_FILE),
        "database": DATABASE,
        "warehouse": f"s3://{s3['bucket']}/{WAREHOUSE_PREFIX}",
    }


def environment(cfg: dict[str, Any], pg: dict[str, Any], s3: dict[str, Any]) -> dict[str, str]:
    """The server's environment: the backend catalog's ``CATALOG_*`` properties (the stack's PostgreSQL and
    S3 server) and the gate's secrets."""
    creds = seaweedfs.credentials(s3)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
        "CATALOG_URI": f"jdbc:postgresql://{pg['host']}:{pg['port']}/{cfg['database']}",
        "CATALOG_JDBC_USER": pg["user"],
        "CATALOG_JDBC_PASSWORD": Path(pg["password_file"]).read_text().strip(),
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_WAREHOUSE": cfg["warehouse"],
        # S3FileIO for s3: locations, HadoopFileIO for file: ones (a table on local disk, its location given)
        "CATALOG_IO__IMPL": "org.apache.iceberg.io.ResolvingFileIO",
        "CATALOG_S3_ENDPOINT": creds.endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_S3_ACCESS__KEY__ID": creds.access_key,
        "CATALOG_S3_SECRET__ACCESS__KEY": creds.secret_key,
        "CATALOG_CLIENT_REGION": creds.region,
        "CATALOG_INCLUDE__CREDENTIALS": "true",
        "AKO_REST_PORT": str(cfg["port"]),
        "AKO_REST_CLIENT_ID": cfg["client_id"],
        "AKO_REST_CLIENT_SECRET": client_secret(cfg),
        "AKO_REST_TOKEN": token(cfg),
    }


def _argv(cfg: dict[str, Any]) -> list[str]:
    app = Path(cfg["app_dir"])
    return [
        procs.require_tool("java", "install a JDK 17, e.g. apt-get install openjdk-17-jdk-headless"),
        f"-Xmx{HEAP}",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # C1 only: a catalog's few requests never pay back C2's start cost
        "-Xss512k",
        "-Djava.awt.headless=true",
        f"-Dako.rest.host={cfg['host']}",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        f"-Dako.stack.dir={cfg['base_dir']}",  # the marker that tells our process from a recycled pid
        "-cp",
        f"{app / 'classes'}:{app / 'libs'}/*",
        MAIN,
    ]


def start(cfg: dict[str, Any], pg: dict[str, Any], s3: dict[str, Any], timeout: float = 90) -> int:
    """Start the server detached and wait until it answers the stack's token; return its pid."""
    procs.ensure_port_free(cfg["port"], "Iceberg REST catalog", wait_s=10)
    cfg["app_dir"] = str(jars.fetch_iceberg_rest(cfg["version"], quiet=True))  # cleared or rebuilt since `up`
    postgres.ensure_database(pg, cfg["database"])
    pid = procs.spawn_detached(_argv(cfg), Path(cfg["stdout"]), cwd=Path(cfg["base_dir"]), env=environment(cfg, pg, s3))
    try:
        wait_ready(cfg, pid, timeout)
    except StackError:
        procs.terminate(pid, marker=_marker(cfg), timeout=10)
        raise
    return pid


def wait_ready(cfg: dict[str, Any], pid: int, timeout: float) -> None:
    what = f"the Iceberg REST catalog on {url(cfg)}"
    procs.wait_answering(what, pid, lambda: probe(cfg), cfg["stdout"], timeout, every=0.2)


def probe(cfg: dict[str, Any], timeout: float = 3.0) -> bool:
    """True if ``GET /v1/config`` answers 200 to the stack's token."""
    headers = {"Authorization": f"Bearer {token(cfg)}", "Accept": "application/json"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url(cfg) + "/v1/config", headers=headers), timeout=timeout):
            return True
    except (urllib.error.HTTPError, OSError):
        return False


def _marker(cfg: dict[str, Any]) -> str:
    return f"-Dako.stack.dir={cfg['base_dir']}"


def stop(cfg: dict[str, Any], hard: bool = False, timeout: float = 20) -> None:
    """SIGTERM (Jetty stops; every commit is a PostgreSQL transaction), SIGKILL after ``timeout``."""
    procs.terminate(cfg.get("pid"), marker=_marker(cfg), timeout=timeout, kill=hard)


def is_running(cfg: dict[str, Any]) -> bool:
    return procs.pid_alive(cfg.get("pid"), marker=_marker(cfg))


def rss_bytes(cfg: dict[str, Any]) -> int | None:
    """The running server's resident memory (None when it does not run)."""
    return procs.rss_bytes(cfg.get("pid"), _marker(cfg))
