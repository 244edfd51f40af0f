"""Build and run the spark-submit of one batch attempt through the Spark provider's hook.

The Spark connection decides where it runs (local, standalone, YARN,
Kubernetes). Kafka settings and ``private_conf`` (e.g. S3 credentials), secrets
included, travel in a private job file shipped with ``--files``: never on the
command line, never in the log.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from airflow_kafka_offsets.clients import class_archive
from airflow_kafka_offsets.clients.object_store import S3Access
from airflow_kafka_offsets.clients.versions import check_connector_jars, connector_coordinates, local_pyspark_version
from airflow_kafka_offsets.core.spark_failures import FailureKind, FailureScanner
from airflow_kafka_offsets.errors import (
    ConfigurationError,
    SparkAuthenticationError,
    SparkConnectorMissingError,
    SparkDataLossError,
    SparkExecutorLostError,
    SparkJobError,
    SparkObjectStoreError,
    SparkOutOfMemoryError,
)
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import HADOOP_PREFIX, PRIVATE_CONF

APP_MODULE = "airflow_kafka_offsets.spark_apps"
APP_FILE = "kafka_range_batch.py"
CONTRACT_FILE = "kafka_batch_contract.py"
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.compression.codec": "zstd",
    # zstd level 1 instead of Parquet's 3: the Parquet write of 1M Kafka records took a third less
    # time, for files no larger on JSON payloads (benchmarks/README.md, profile_read.py).
    "spark.hadoop.parquet.compression.codec.zstd.level": "1",
    # The app's only shuffles are the read-back check's two aggregations, which hold one row per 64
    # offsets: without adaptive execution they run as one Spark job instead of three, with two tasks
    # per shuffle instead of 200 (benchmarks/README.md: the check of a 10,000-record batch on a warm
    # Spark Connect server took 0.85 s instead of 1.5 s). Raise the partitions in spark_conf for
    # batches of billions of records.
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.log.level": "WARN",
    "spark.ui.showConsoleProgress": "false",
    # The driver JVM compiles with C1 only. A batch's driver lives for one short job, and its time
    # went to compiling Spark's planner with C2 (benchmarks/README.md: a small batch 1.8x faster,
    # 2M records no slower, less CPU). In local[N] mode the driver also runs the tasks: for batches
    # of tens of millions of records on an idle many-core machine, C2 may win back more than it
    # costs; set this to "" in spark_conf there. Prepended to spark.driver.extraJavaOptions, which
    # stays yours; cluster executors are not affected.
    "spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1",
}


def app_file(name: str = APP_FILE) -> str:
    """A file of the PySpark application shipped inside this package."""
    path = files(APP_MODULE).joinpath(name)
    if not path.is_file():
        raise ConfigurationError(f"the Spark application file {APP_MODULE}/{name} is missing from the install")
    return str(path)


def split_list(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(i.strip() for i in items if i and i.strip())


@dataclass(frozen=True)
class SparkSettings:
    """Everything about the spark-submit that is not the batch itself."""

    conn_id: str = "spark_default"
    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)
    # Settings that hold secrets (only spark.hadoop.*, e.g. object_store.s3a_spark_conf): in the job
    # file, applied by the app to its Hadoop configuration before any I/O; never on the command line.
    private_conf: Mapping[str, str] = field(default_factory=dict, repr=False)
    # How the worker reaches an s3:// output itself (Spark Connect mode writes the report from there).
    storage: S3Access | None = None
    executor_cores: int | None = None
    executor_memory: str | None = None
    driver_memory: str | None = None
    num_executors: int | None = None
    total_executor_cores: int | None = None
    spark_binary: str = "spark-submit"
    # Where the driver JVM's class-data-sharing archive lives (clients/class_archive.py); None: none.
    class_archive_dir: str | None = None
    # The app and the conf every batch starts from; benchmarks and tests substitute their own.
    application: str | None = None
    default_conf: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SPARK_CONF))

    def resolved_dependencies(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Jars and packages to hand spark-submit; default: the connector matching the local pyspark."""
        if self.jars:
            missing = [j for j in self.jars if "://" not in j and not Path(j).is_file()]
            if missing:
                raise ConfigurationError(f"Spark jar(s) not found: {', '.join(missing)}")
            check_connector_jars(self.jars, local_pyspark_version())
            return self.jars, self.packages
        if self.packages:
            return (), self.packages
        return (), (connector_coordinates(local_pyspark_version()),)


def check_spark_connection(conn_id: str) -> Any:
    """The Spark provider silently falls back to master 'yarn' without a connection: refuse that.

    Returns the connection."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException as exc:
        raise ConfigurationError(
            f"Spark connection {conn_id!r} is not defined; define it (e.g. AIRFLOW_CONN_{conn_id.upper()}="
            '\'{"conn_type": "spark", "host": "local[2]"}\') rather than letting spark-submit default to YARN'
        ) from exc
    except Exception as exc:  # a broken secrets backend or metadata database (its text may quote the secret)
        raise ConfigurationError(
            f"Spark connection {conn_id!r} could not be read from Airflow ({type(exc).__name__}; see the cause); "
            "refusing to let spark-submit default to YARN"
        ) from exc
    if not (conn.host or "").strip():
        raise ConfigurationError(
            f"Spark connection {conn_id!r} has no host: set it to the Spark master (local[2], spark://host:7077, "
            "yarn, k8s://...)"
        )
    return conn


def _write_private(path: Path, payload: Mapping[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)


class SparkBatchSubmitter:
    """Callable that runs one job (see :func:`airflow_kafka_offsets.service.batches.build_job`) with spark-submit."""

    def __init__(self, settings: SparkSettings) -> None:
        self.settings = settings
        self._running: Any = None  # the SparkSubmitHook of the submit in progress

    def kill(self) -> None:
        """Stop the running spark-submit (and a cluster-mode driver): the task was killed."""
        if self._running is not None:
            self._running.on_kill()

    def check(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Refuse a configuration spark-submit cannot run (before any ledger write); returns (jars, packages)."""
        settings = self.settings
        conn = check_spark_connection(settings.conn_id)
        if settings.class_archive_dir:
            class_archive.check_directory(settings.class_archive_dir)
            if conn.extra_dejson.get("deploy-mode") == "cluster":
                raise ConfigurationError(
                    f"spark_class_archive_dir is set but Spark connection {settings.conn_id!r} runs the driver in "
                    "cluster deploy mode, on another machine: the archive is for a driver on this worker; unset one"
                )
        not_hadoop = sorted(k for k in settings.private_conf if not k.startswith(HADOOP_PREFIX))
        if not_hadoop:
            raise ConfigurationError(
                f"private Spark settings must be {HADOOP_PREFIX}* (the app applies them to its Hadoop "
                f"configuration); pass these as conf instead: {', '.join(not_hadoop)}"
            )
        if shutil.which(settings.spark_binary) is None:
            raise ConfigurationError(
                f"{settings.spark_binary} is not on PATH; install Spark (or pyspark) and put its bin directory on PATH"
            )
        return settings.resolved_dependencies()

    def __call__(self, job: Mapping[str, Any]) -> None:
        settings = self.settings
        jars, packages = self.check()
        with tempfile.TemporaryDirectory(prefix="kafka-batch-") as private_dir:  # mode 0700
            job_file = Path(private_dir) / f"kafka-batch-{job['attempt_id']}.json"
            _write_private(job_file, {**job, PRIVATE_CONF: dict(settings.private_conf)})
            # Spark copies --files into its local directories (spark-*/userFiles-*): keep the local
            # processes' ones in this private directory too, so a killed worker leaves no copy elsewhere.
            local_dirs = Path(private_dir) / "spark-local"
            local_dirs.mkdir(mode=0o700)
            conf = {**settings.default_conf, **settings.conf}
            archive = None
            if settings.class_archive_dir:
                identity = class_archive.jvm_identity(settings.spark_binary, jars, packages)
                archive = class_archive.prepare(settings.class_archive_dir, identity, job["attempt_id"])
                conf = class_archive.with_driver_java_option(conf, archive.java_option)
            hook = _diagnosing_hook_class()(
                conf=conf,
                conn_id=settings.conn_id,
                files=str(job_file),
                py_files=app_file(CONTRACT_FILE),
                jars=",".join(jars) or None,
                packages=",".join(packages) or None,
                name=f"kafka-batch-{job['pipeline']}-{job['batch_id']}",
                application_args=["--job-file", str(job_file)],
                executor_cores=settings.executor_cores,
                executor_memory=settings.executor_memory,
                driver_memory=settings.driver_memory,
                num_executors=settings.num_executors,
                total_executor_cores=settings.total_executor_cores,
                spark_binary=settings.spark_binary,
            )
            self._running = hook
            succeeded = False
            try:
                hook.submit(settings.application or app_file(), env={**os.environ, "SPARK_LOCAL_DIRS": str(local_dirs)})
                succeeded = True
            except Exception as exc:
                # a known cause says it all; otherwise keep the hook's error chained for the traceback
                raise spark_job_error(job, hook.scanner, str(exc)) from (None if hook.scanner.found else exc)
            finally:
                if archive is not None:
                    class_archive.settle(archive, succeeded)


_ERROR_CLASSES: Mapping[FailureKind, type[SparkJobError]] = {
    FailureKind.DATA_LOSS: SparkDataLossError,
    FailureKind.AUTHENTICATION: SparkAuthenticationError,
    FailureKind.AUTHORIZATION: SparkAuthenticationError,
    FailureKind.OBJECT_STORE_ACCESS: SparkObjectStoreError,
    FailureKind.CONNECTOR_MISSING: SparkConnectorMissingError,
    FailureKind.OUT_OF_MEMORY: SparkOutOfMemoryError,
    FailureKind.EXECUTOR_LOST: SparkExecutorLostError,
}
_EXIT_CODE = re.compile(r"Error code is: (-?\d+)")


def spark_job_error(job: Mapping[str, Any], scanner: FailureScanner, hook_message: str) -> SparkJobError:
    """The exception for a failed spark-submit: the cause found in Spark's output and the next step.

    The hook's own message (the command line and a tail of JVM frames) is left out: the full
    output is in the task log above.
    """
    what = f"Spark job for batch {job['batch_id']} of pipeline {job['pipeline']!r} failed"
    failure = scanner.found
    if failure is not None:
        return _ERROR_CLASSES[failure.kind](
            f"{what}: {failure.cause}. Next: {failure.next_step}.\nSpark's output: {failure.evidence}"
        )
    code = _EXIT_CODE.search(hook_message)
    exit_code = f"spark-submit exited with code {code.group(1)}" if code else "spark-submit failed"
    last = f"; its last error: {scanner.last_error_line}" if scanner.last_error_line else ""
    return SparkJobError(f"{what}: {exit_code}{last}. Spark's full output is in the task log above")


@functools.cache
def _diagnosing_hook_class() -> type:
    """SparkSubmitHook that also feeds each output line to a :class:`FailureScanner` as it streams by.

    The hook keeps only a short tail of the output, and the cause of a failed batch is often
    hundreds of lines above the end.
    """
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class DiagnosingSparkSubmitHook(SparkSubmitHook):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.scanner = FailureScanner()

        def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
            super()._process_spark_submit_log(self.scanner.scan(itr))

    return DiagnosingSparkSubmitHook
