"""Run one batch attempt against a long-lived Spark Connect server instead of spark-submit.

The connection is the Spark provider's ``spark_connect`` type (``SparkConnectHook``: host, port,
login = user id, password = token, extra ``use_ssl``), read from Airflow once into a
:class:`~.connection.SparkConnection` whose ``sc://`` URL the runner is given. The app's own code
(``spark_apps/kafka_range_batch.py``: read, write, summarize, check) runs in this process on a
remote session, so no JVM starts here; the Kafka read and the Parquet write run on the server.
The report the commit step checks is the same file with the same fields as under spark-submit;
this process writes it (and measures the output) through the sink's storage, as the JVM does there.

Secrets: the token stays inside the connection URL handed to pyspark in this process (no command
line, never logged), Kafka settings travel as reader options and the private ``spark.hadoop.*``
settings as session conf, both over the Connect channel.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_offsets.errors import ConfigurationError, KafkaOffsetsError, SparkJobError
from airflow_kafka_offsets.object_storage.storage import Storage
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.failures import MAX_EVIDENCE, FailureScanner, spark_job_error
from airflow_kafka_offsets.spark.formats import with_registry_access
from airflow_kafka_offsets.spark.keepalive import DEFAULT_KEEPALIVE, ConnectKeepalive
from airflow_kafka_offsets.spark.settings import DEFAULT_SPARK_CONF, SparkSettings
from airflow_kafka_offsets.spark.versions import check_connect_client, worker_pyspark
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import HADOOP_PREFIX, PRIVATE_CONF, apply_private_conf

log = logging.getLogger(__name__)

CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"  # pyspark's mark of a Connect-only process
# Session settings a Connect client may change: the SQL ones of the spark-submit defaults and their
# Hadoop ones (the Parquet writer's; see session_conf). The others, like the driver's JVM options,
# belong to the server's start.
SESSION_DEFAULTS: Mapping[str, str] = {
    k: v for k, v in DEFAULT_SPARK_CONF.items() if k.startswith("spark.sql.") or k.startswith(HADOOP_PREFIX)
}
# pyspark retries an unreachable server for about ten minutes by default; a server that died
# mid-batch has lost the attempt anyway: fail within seconds, and let the task retry.
RETRIES = 4
MAX_BACKOFF_MS = 4000
PARALLELISM_PROBE_ROWS = 1 << 16
_SPLITS = re.compile(r"Range \(0, \d+, step=1, splits=(\d+)\)")
# spark-submit settings a Connect session cannot change (the server's own start decides them)
SUBMIT_ONLY = ("executor_cores", "executor_memory", "driver_memory", "num_executors", "total_executor_cores")


def endpoint(url: str) -> str:
    """host:port of a Connect URL, without its parameters (the token)."""
    return urlsplit(url.split(";", 1)[0]).netloc


def remote_session(url: str, keepalive: ConnectKeepalive = DEFAULT_KEEPALIVE) -> Any:
    """A new session on the server, built with the Connect client's own builder (pyspark's generic one
    marks the process Connect-only for good: see :func:`connect_mode`), its channel pinging the server
    while a call waits (:mod:`~airflow_kafka_offsets.spark.keepalive`)."""
    from pyspark.sql.connect.client.core import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession

    channel = DefaultChannelBuilder(url, keepalive.channel_options())
    return SparkSession.builder.channelBuilder(channel).create()


@contextmanager
def connect_mode() -> Iterator[None]:
    """pyspark's column functions build Connect expressions only while this process is marked Connect
    (an environment variable); the mark is taken away afterwards, since spark-submit children inherit
    it and their classic sessions then refuse to start."""
    before = os.environ.get(CONNECT_MODE_ENV)
    os.environ[CONNECT_MODE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE_ENV, None)
        else:
            os.environ[CONNECT_MODE_ENV] = before


# A server's version, as this worker last saw it, is trusted for this long by the plan step's check
# (asking costs a Connect client's import, about a second); the read step always asks its own session.
SERVER_VERSION_TTL_S = 300.0
_SERVER_VERSIONS: dict[str, str] = {}


def _versions_file() -> Path:
    return Path(tempfile.gettempdir()) / f"airflow-kafka-offsets-{os.getuid()}" / "connect-server-versions.json"


def _url_key(url: str) -> str:
    """The cache's key for a server: a digest, since the URL holds the token."""
    return hashlib.sha256(url.encode()).hexdigest()


def _seen_versions() -> dict[str, Any]:
    try:
        seen = json.loads(_versions_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return seen if isinstance(seen, dict) else {}


def remember_server_version(url: str, version: str) -> None:
    """Record what a session saw, for the next tasks of this worker (written whole, then renamed)."""
    _SERVER_VERSIONS[url] = version
    path = _versions_file()
    seen = _seen_versions()
    seen[_url_key(url)] = {"version": version, "seen_at": time.time()}
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(seen), encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        log.debug("Spark Connect server version not cached (%s)", exc)


def _recent_version(url: str) -> str | None:
    entry = _seen_versions().get(_url_key(url))
    if not isinstance(entry, dict) or not isinstance(entry.get("version"), str):
        return None
    age = time.time() - float(entry.get("seen_at", 0))
    return entry["version"] if 0 <= age < SERVER_VERSION_TTL_S else None


def server_version(url: str) -> str:
    """The Spark version a Connect server runs: asked once per process and server, or what this worker
    saw in the last :data:`SERVER_VERSION_TTL_S` seconds (the read step's session checks it again)."""
    if url in _SERVER_VERSIONS:
        return _SERVER_VERSIONS[url]
    recent = _recent_version(url)
    if recent is not None:
        _SERVER_VERSIONS[url] = recent
        return recent
    from pyspark.errors import PySparkException

    try:
        with connect_mode():
            session = remote_session(url)
            session.client.set_retry_policies([_retry_policy()])
            try:
                version = str(session.version)
            finally:
                _release(session)
    except (PySparkException, RuntimeError, OSError) as exc:
        where = endpoint(url)
        if _unreachable(exc):
            raise SparkJobError(
                f"the Spark Connect server at {where} did not answer; start it (scripts/stack up "
                "--spark-connect locally), then retry"
            ) from exc
        raise ConfigurationError(f"the Spark Connect server at {where} refused a session: {exc}") from exc
    remember_server_version(url, version)
    return version


def _retry_policy() -> Any:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=RETRIES, max_backoff=MAX_BACKOFF_MS)


class ConnectRuntime:
    """The app's :class:`Runtime` on a Connect session: checks and files from this process."""

    def __init__(self, spark: Any, storage: Storage, url: str) -> None:
        self.spark = spark
        self.storage = storage
        self.url = url

    def check_versions(self) -> None:
        version = str(self.spark.version)
        remember_server_version(self.url, version)
        check_connect_client(worker_pyspark().version, version, "this session's server")

    def parallelism(self) -> int:
        """Spark's default parallelism on the server: the tasks its plan splits a range of rows into.

        Read from the physical plan (one analysis call, no job: a job costs a warm server more than
        the rest of a small batch's set-up); 1 when the plan does not say.
        """
        plan = self.spark.range(0, PARALLELISM_PROBE_ROWS)._explain_string(extended=False)
        found = _SPLITS.search(plan)
        return int(found.group(1)) if found else 1

    def output_bytes(self, uri: str) -> int:
        return self.storage.tree_size(uri)

    def footers(self, uri: str) -> list[dict[str, Any]]:
        return self.storage.footers(uri)

    def write_report(self, staging_uri: str, text: str) -> None:
        from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME

        self.storage.write_bytes(staging_uri.rstrip("/") + "/" + REPORT_NAME, text.encode("utf-8"))


class _SessionConf(dict[str, str]):
    """``apply_private_conf``'s Hadoop configuration for a Connect session: the settings are sent as
    session conf, which Spark merges into the Hadoop configuration of every read and write."""

    def set(self, key: str, value: str) -> None:
        self[key] = value


def session_conf(settings: SparkSettings) -> dict[str, str]:
    """The session's settings: the SQL defaults, the user's conf and the private Hadoop settings.

    A long-lived server caches one file system per bucket with the settings of whoever opened it
    first; for the file systems the private settings configure, this session opens its own.
    """
    private = _SessionConf()
    apply_private_conf({PRIVATE_CONF: dict(settings.private_conf)}, private)
    own = {f"fs.{key.split('.')[1]}.impl.disable.cache": "true" for key in private if key.startswith("fs.")}
    return {**hadoop_keys_bare({**SESSION_DEFAULTS, **settings.conf}), **private, **own}


def hadoop_keys_bare(conf: Mapping[str, Any]) -> dict[str, str]:
    """``spark.hadoop.*`` settings under their Hadoop names: Spark copies a session's conf into the
    Hadoop configuration of its reads and writes key for key, where spark-submit strips the prefix."""
    return {key.removeprefix(HADOOP_PREFIX): str(value) for key, value in conf.items()}


class SparkConnectRunner:
    """Callable that runs one job (see :func:`airflow_kafka_offsets.service.attempts.build_job`) on a Connect server."""

    def __init__(self, settings: SparkSettings, connection: SparkConnection) -> None:
        self.settings = settings
        self.connection = connection
        self._session: Any = None
        self._lock = threading.Lock()

    def check(self) -> str:
        """Refuse a connection Spark Connect cannot use, or a server this worker's client cannot drive
        (before anything is planned); returns its URL."""
        url = self.connection.connect_url()
        ignored = [name for name in SUBMIT_ONLY if getattr(self.settings, name) is not None]
        if ignored:
            raise ConfigurationError(
                f"{', '.join(ignored)} cannot be set with the Spark Connect connection {self.connection.conn_id!r}: "
                "the server's own start decides them; drop them, or use a spark connection (spark-submit)"
            )
        self.keepalive()  # a bad value is refused before anything is planned
        check_connect_client(worker_pyspark().version, server_version(url), endpoint(url))
        return url

    def keepalive(self) -> ConnectKeepalive:
        return ConnectKeepalive.from_extra(self.connection.conn_id, self.connection.extra)

    def kill(self) -> None:
        """Interrupt what the session runs on the server: the task was killed."""
        with self._lock:
            if self._session is not None:
                self._session.interruptAll()

    def __call__(self, job: Mapping[str, Any]) -> None:
        from pyspark.errors import PySparkException

        url = self.check()
        where = endpoint(url)
        try:
            with connect_mode():
                report = self._run(url, job)
        except KafkaOffsetsError:
            raise
        except (PySparkException, RuntimeError, ValueError, OSError) as exc:
            # RuntimeError: the app's check of what was written (BatchCheckError) among them; ValueError: its
            # refusals of a batch's content (a change without its key, a value the decode cannot take)
            raise connect_job_error(job, where, exc) from exc
        records = sum(p["records"] for p in report["partitions"])
        log.info(
            "pipeline %s: batch %s: %s records staged by Spark Connect at %s (%s)",
            job["pipeline"],
            job["batch_id"],
            records,
            where,
            report["application_id"],
        )

    def _run(self, url: str, job: Mapping[str, Any]) -> dict[str, Any]:
        from airflow_kafka_offsets.spark_apps import kafka_range_batch as app

        spark = remote_session(url, self.keepalive())
        spark.client.set_retry_policies([_retry_policy()])
        with self._lock:
            self._session = spark
        try:
            _set_session_conf(spark, session_conf(self.settings))
            private_job = with_registry_access(job, self.settings)
            report: dict[str, Any] = app.run(
                private_job, spark, ConnectRuntime(spark, Storage(self.settings.storage), url)
            )
            return report
        finally:
            with self._lock:
                self._session = None
            _release(spark)


def _set_session_conf(spark: Any, conf: Mapping[str, str]) -> None:
    """All settings in one call (pyspark's builder sends its options the same way, but ignores refusals)."""
    from pyspark.errors import PySparkException

    try:
        spark.conf._set_all(configs=dict(conf), silent=False)
    except PySparkException as exc:
        if "CANNOT_MODIFY_CONFIG" not in str(exc):
            raise
        first = str(exc).splitlines()[0]
        raise ConfigurationError(
            f"a Spark Connect session cannot change this setting ({first}): the server's own start decides it; "
            "set it there, or leave it out of spark_conf"
        ) from exc


def _release(spark: Any) -> None:
    """End the server-side session; a server that is gone has ended it already."""
    try:
        spark.stop()
    except Exception as exc:  # the attempt's own outcome is what matters
        log.warning("Spark Connect session could not be released: %s", type(exc).__name__)


def connect_job_error(job: Mapping[str, Any], where: str, exc: BaseException) -> SparkJobError:
    """The exception for a failed Connect attempt: a known cause with its next step, a request of this
    worker that failed (its text may say "Connection refused": that is not the server's gRPC channel), an
    unreachable server, or the server's first line."""
    scanner = FailureScanner()
    for line in str(exc).splitlines():
        scanner.feed(line)
    if scanner.found is not None:
        return spark_job_error(job, scanner, "")
    what = f"Spark job for batch {job['batch_id']} of pipeline {job['pipeline']!r} failed"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    if isinstance(exc, OSError):  # this process's own request (the app's registry lookups, a report on S3)
        return SparkJobError(
            f"{what}: a request of this worker failed ({type(exc).__name__}: {first[:1000]}); the attempt is lost "
            "(the Spark Connect server is not the cause). Next: check that the service it names answers this "
            "worker, then retry the read"
        )
    if _unreachable(exc):
        detail = next((line for line in lines if line.startswith(("status", "details"))), first)  # gRPC's own
        return SparkJobError(
            f"{what}: the Spark Connect server at {where} did not answer ({detail[:300]}); the attempt is lost. "
            "Next: check that the server runs and this worker reaches it (scripts/stack up --spark-connect locally), "
            "then retry the read"
        )
    return SparkJobError(
        f"{what} on the Spark Connect server at {where}: {type(exc).__name__}: {first[:1000]}",
        scanner.root_cause or first[:MAX_EVIDENCE],
    )


_UNREACHABLE = ("UNAVAILABLE", "failed to connect to all addresses", "Connection refused", "Socket closed")


def _unreachable(exc: BaseException) -> bool:
    """gRPC said the server is unavailable (pyspark raises the last such error once its retries run out)."""
    return any(marker in str(exc) for marker in _UNREACHABLE)
