"""Build and run the spark-submit of one batch attempt through the Spark provider's hook.

The Spark connection decides where it runs (local, standalone, YARN, Kubernetes): checked as read
from Airflow once (:class:`~.connection.SparkConnection`), then named to the provider's
SparkSubmitHook, which builds the command from it. Kafka settings and ``private_conf`` (e.g. S3
credentials), secrets included, travel in a private job file shipped with ``--files``: never on the
command line, never in the log.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.spark import class_archive
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.failures import FailureScanner, spark_job_error
from airflow_kafka_offsets.spark.formats import job_dependencies, with_registry_access
from airflow_kafka_offsets.spark.published import connector_release
from airflow_kafka_offsets.spark.settings import APP_MODULES, SparkSettings, app_file
from airflow_kafka_offsets.spark.versions import (
    ClusterSpark,
    check_connector_jars,
    check_connector_packages,
    check_driver_pyspark,
    declared_spark,
    submit_spark,
)
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import HADOOP_PREFIX, PRIVATE_CONF, connector_coordinates

# The Spark provider's own list (SparkSubmitHook refuses any other spark-binary).
DEFAULT_SPARK_BINARY = "spark-submit"
ALLOWED_SPARK_BINARIES = (DEFAULT_SPARK_BINARY, "spark2-submit", "spark3-submit")


def _write_private(path: Path, payload: Mapping[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)


@dataclass(frozen=True)
class SubmitPlan:
    """What one spark-submit runs with, as checked before anything is planned."""

    binary: str
    spark: ClusterSpark
    jars: tuple[str, ...]
    packages: tuple[str, ...]


class SparkBatchSubmitter:
    """Callable that runs one job (see :func:`airflow_kafka_offsets.service.attempts.build_job`) with spark-submit."""

    def __init__(self, settings: SparkSettings, connection: SparkConnection) -> None:
        self.settings = settings
        self.connection = connection
        self._running: Any = None  # the SparkSubmitHook of the submit in progress

    def kill(self) -> None:
        """Stop the running spark-submit (and a cluster-mode driver): the task was killed."""
        if self._running is not None:
            self._running.on_kill()

    def check(self) -> SubmitPlan:
        """Refuse a configuration spark-submit cannot run (before anything is planned): the connection's
        settings, the Spark its binary runs, the pyspark its driver would import, and the connector jars or
        packages for that Spark."""
        settings, conn_id, extra = self.settings, self.connection.conn_id, self.connection.extra
        if settings.class_archive_dir:
            class_archive.check_directory(settings.class_archive_dir)
            if extra.get("deploy-mode") == "cluster":
                raise ConfigurationError(
                    f"spark_class_archive_dir is set but Spark connection {conn_id!r} runs the driver in "
                    "cluster deploy mode, on another machine: the archive is for a driver on this worker; unset one"
                )
        not_hadoop = sorted(k for k in settings.private_conf if not k.startswith(HADOOP_PREFIX))
        if not_hadoop:
            raise ConfigurationError(
                f"private Spark settings must be {HADOOP_PREFIX}* (the app applies them to its Hadoop "
                f"configuration); pass these as conf instead: {', '.join(not_hadoop)}"
            )
        binary = settings.spark_binary or extra.get("spark-binary") or DEFAULT_SPARK_BINARY
        if binary not in ALLOWED_SPARK_BINARIES:
            raise ConfigurationError(
                f"Spark connection {conn_id!r}: spark-binary {binary!r} is not one of "
                f"{', '.join(ALLOWED_SPARK_BINARIES)} (the Spark provider runs only those, found on PATH): put the "
                "bin directory of the cluster's Spark first on the worker's PATH, or set SPARK_HOME"
            )
        found = shutil.which(binary)
        if found is None:
            raise ConfigurationError(
                f"{binary} (Spark connection {conn_id!r}) is not on PATH; install the cluster's Spark client "
                "(or pyspark) and put its bin directory on PATH"
            )
        spark = self.cluster_spark(found)
        if extra.get("deploy-mode") != "cluster":  # in cluster mode the driver's Python is on another machine
            check_driver_pyspark(spark, {**settings.default_conf, **settings.conf}, os.environ)
        jars, packages = self.dependencies(spark)
        return SubmitPlan(binary, spark, jars, packages)

    def cluster_spark(self, binary_path: str) -> ClusterSpark:
        """The Spark the batch runs on: declared on the connection or in the config, else found."""
        declared = self.connection.extra.get("spark-version")
        if declared:
            return declared_spark(str(declared), f"spark-version of connection {self.connection.conn_id!r}")
        if self.settings.spark_version:
            return declared_spark(self.settings.spark_version, "[kafka_offsets] spark_version")
        return submit_spark(binary_path, os.environ)

    def dependencies(self, spark: ClusterSpark) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Jars and packages to hand spark-submit; default: the connector built for that Spark's line, at
        the nearest release its Maven repository serves (:func:`.published.connector_release`)."""
        settings = self.settings
        if settings.jars:
            missing = [j for j in settings.jars if "://" not in j and not Path(j).is_file()]
            if missing:
                raise ConfigurationError(f"Spark jar(s) not found: {', '.join(missing)}")
            check_connector_jars(settings.jars, spark)
            check_connector_packages(settings.packages, spark)
            return settings.jars, settings.packages
        if settings.packages:
            check_connector_packages(settings.packages, spark)
            return (), settings.packages
        return (), (connector_coordinates(connector_release(spark, settings.conf), spark.scala),)

    def __call__(self, job: Mapping[str, Any]) -> None:
        settings = self.settings
        submit = self.check()
        jars, packages = job_dependencies(job, submit.spark, submit.jars, submit.packages, settings.conf)
        private_job = with_registry_access(job, settings)
        with tempfile.TemporaryDirectory(prefix="kafka-batch-") as private_dir:  # mode 0700
            job_file = Path(private_dir) / f"kafka-batch-{job['attempt_id']}.json"
            _write_private(job_file, {**private_job, PRIVATE_CONF: dict(settings.private_conf)})
            # Spark copies --files into its local directories (spark-*/userFiles-*): keep the local
            # processes' ones in this private directory too, so a killed worker leaves no copy elsewhere.
            local_dirs = Path(private_dir) / "spark-local"
            local_dirs.mkdir(mode=0o700)
            conf = {**settings.default_conf, **settings.conf}
            archive = None
            if settings.class_archive_dir:
                identity = class_archive.jvm_identity(submit.binary, jars, packages)
                archive = class_archive.prepare(settings.class_archive_dir, identity, job["attempt_id"])
                conf = class_archive.with_driver_java_option(conf, archive.java_option)
            hook = _diagnosing_hook_class()(
                conf=conf,
                conn_id=self.connection.conn_id,
                files=str(job_file),
                py_files=",".join(app_file(name) for name in APP_MODULES),
                jars=",".join(jars) or None,
                packages=",".join(packages) or None,
                name=f"kafka-batch-{job['pipeline']}-{job['batch_id']}",
                application_args=["--job-file", str(job_file)],
                executor_cores=settings.executor_cores,
                executor_memory=settings.executor_memory,
                driver_memory=settings.driver_memory,
                num_executors=settings.num_executors,
                total_executor_cores=settings.total_executor_cores,
                spark_binary=submit.binary,
                log_file=settings.log_file,
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
                hook.close_log()
                if archive is not None:
                    class_archive.settle(archive, succeeded)


@functools.cache
def _diagnosing_hook_class() -> type:
    """SparkSubmitHook that also feeds each output line to a :class:`FailureScanner` as it streams by.

    The hook keeps only a short tail of the output, and the cause of a failed batch is often
    hundreds of lines above the end.
    """
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class DiagnosingSparkSubmitHook(SparkSubmitHook):
        def __init__(self, log_file: str | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.scanner = FailureScanner()
            self._file_handler: logging.Handler | None = None
            if log_file is not None:  # every line the hook logs (spark-submit's output) goes to the file
                self._file_handler = logging.FileHandler(log_file, encoding="utf-8")
                self._file_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
                to_file = logging.Logger("spark-submit")  # not registered: no propagation to the root's handlers
                to_file.addHandler(self._file_handler)
                self._log = to_file  # type: ignore[assignment]  # a stdlib Logger has the same methods

        def close_log(self) -> None:
            if self._file_handler is not None:
                self._file_handler.close()

        def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
            super()._process_spark_submit_log(self.scanner.scan(itr))

    return DiagnosingSparkSubmitHook
