"""What a batch's Spark read is given besides the batch itself: the app, the default conf, the settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from airflow_kafka_offsets.core.defaults import DEFAULT_SPARK_CONN_ID
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.access import S3Access

APP_MODULE = "airflow_kafka_offsets.spark_apps"
APP_FILE = "kafka_range_batch.py"
# The app's own modules, shipped beside it with --py-files (the app imports them by file name).
APP_MODULES = (
    "kafka_batch_contract.py",
    "kafka_batch_avro.py",
    "kafka_batch_read.py",
    "kafka_batch_check.py",
    "kafka_batch_proof.py",
    "kafka_batch_decode.py",
    "kafka_batch_routes.py",
    "kafka_batch_changes.py",
    "kafka_batch_rewrite.py",
)
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

    conn_id: str = DEFAULT_SPARK_CONN_ID
    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)
    # Settings that hold secrets (only spark.hadoop.*, e.g. object_store.s3a_spark_conf): in the job
    # file, applied by the app to its Hadoop configuration before any I/O; never on the command line.
    private_conf: Mapping[str, str] = field(default_factory=dict, repr=False)
    # How the worker reaches an s3:// output itself (Spark Connect mode writes the report from there).
    storage: S3Access | None = None
    # How Spark reaches a schema registry, by connection id (Avro batches: spark/formats.py); what it
    # returns holds secrets and goes into the private job file only.
    registry_access: Callable[[str], Mapping[str, Any]] | None = field(default=None, repr=False, compare=False)
    executor_cores: int | None = None
    executor_memory: str | None = None
    driver_memory: str | None = None
    num_executors: int | None = None
    total_executor_cores: int | None = None
    # spark-submit's command (a bare name on PATH, as the Spark provider allows); None: the Spark
    # connection's spark-binary extra, else spark-submit.
    spark_binary: str | None = None
    # The Spark that runs the batch when it is declared rather than found (``[kafka_offsets]
    # spark_version``; the Spark connection's spark-version extra wins).
    spark_version: str | None = None
    # Where the driver JVM's class-data-sharing archive lives (spark/class_archive.py); None: none.
    class_archive_dir: str | None = None
    # spark-submit's output (Spark's driver log) goes to this file instead of the log of the task or
    # command (the CLI without --verbose); None: into that log, line by line, as the Spark provider does.
    log_file: str | None = None
    # The app and the conf every batch starts from; benchmarks and tests substitute their own.
    application: str | None = None
    default_conf: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SPARK_CONF))
