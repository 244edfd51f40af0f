"""The Spark app's read step: the job's exact Kafka offset ranges as a DataFrame, after checking that pyspark,
the JVM's Spark and the Kafka connector agree, and what the app needs beyond DataFrames (its Runtime).

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
"""

from __future__ import annotations

import json
import math
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession

if __package__:  # imported by the package (Spark Connect mode): its modules are siblings
    from . import kafka_batch_contract as contract
    from . import kafka_batch_proof as proof
else:  # spark-submit ships them beside this file (--py-files)
    import kafka_batch_contract as contract
    import kafka_batch_proof as proof

COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
RECORDS_PER_TASK = 1_000_000  # default split of long Kafka ranges (min_partitions null)
# Kafka client settings for reading ranges that already exist (a setting in the connection wins):
# no wait at the broker for more data (the Java client's 500 ms cost about 1 s of every small batch:
# 10,000 records on a warm Spark Connect server, read + write job 1.38 s -> 0.44 s; a planned range's
# data is there), and 5,000 records per poll instead of 500 (the Kafka read of 1M records 2.9 s instead
# of 3.6 s on a warm JVM). Larger fetches (20,000 records per poll, 8 MiB per partition) read no faster
# and ran a 5M-record batch out of memory in a 1 GiB local driver: left to the connection.
# (benchmarks/README.md: "Where the time of a small Spark Connect batch goes", "Throughput on a warm
# Spark Connect server")
READ_DEFAULTS = {"fetch.max.wait.ms": "0", "max.poll.records": "5000"}


def connector_version(spark: SparkSession) -> tuple[str, str | None] | None:
    """The Kafka connector's (version, Scala binary version) as the JVM loaded it; None when unknown."""
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        cls = jvm.java.lang.Class.forName(CONNECTOR_CLASS, False, loader)
    except Exception as exc:
        raise RuntimeError(
            "Spark's Kafka connector is not on the classpath: pass spark-sql-kafka-0-10 and its dependencies "
            "with --jars or --packages"
        ) from exc
    source = cls.getProtectionDomain().getCodeSource()
    match = contract.CONNECTOR_JAR.search(str(source.getLocation().getPath())) if source else None
    version = cls.getPackage().getImplementationVersion() if cls.getPackage() else None
    if version:
        return str(version), match.group(1) if match else None
    return (match.group(2), match.group(1)) if match else None


def jvm_scala_version(spark: SparkSession) -> str:
    """The Scala binary version the driver's JVM runs (``2.12``, ``2.13``)."""
    full = str(spark.sparkContext._jvm.scala.util.Properties.versionNumberString())
    return ".".join(full.split(".")[:2])


def check_pyspark_version(spark: SparkSession) -> None:
    """Fail early when the Python files of pyspark are not the Spark they drive."""
    import pyspark

    problem = contract.pyspark_mismatch(pyspark.__version__, str(pyspark.__file__), spark.version)
    if problem:
        raise RuntimeError(problem)


def check_versions(spark: SparkSession) -> None:
    """Fail early when pyspark, the JVM Spark and the Kafka connector disagree."""
    check_pyspark_version(spark)
    found = connector_version(spark)
    if found is not None:
        problem = contract.connector_mismatch(found[0], found[1], spark.version, jvm_scala_version(spark))
        if problem:
            raise RuntimeError(problem)


class Runtime(Protocol):
    """What the app needs beyond DataFrames: the driver's JVM under spark-submit (:class:`JvmRuntime`),
    the package's worker under Spark Connect (``airflow_kafka_offsets.spark.connect``)."""

    def check_versions(self) -> None: ...

    def parallelism(self) -> int: ...

    def output_bytes(self, uri: str) -> int: ...

    def footers(self, uri: str) -> list[dict]:
        """The footers of the data files under ``uri`` (``kafka_batch_proof.py`` says what they hold)."""
        ...

    def write_report(self, staging_uri: str, text: str) -> None: ...


class JvmRuntime:
    """spark-submit: the driver's JVM holds the classpath and Hadoop's file systems."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def check_versions(self) -> None:
        check_versions(self.spark)

    def parallelism(self) -> int:
        return self.spark.sparkContext.defaultParallelism

    def output_bytes(self, uri: str) -> int:
        path, fs = hadoop_path(self.spark, uri)
        return int(fs.getContentSummary(path).getLength())

    def footers(self, uri: str) -> list[dict]:
        """Read with the Parquet library Spark writes with (the driver reads only the files' footers)."""
        path, fs = hadoop_path(self.spark, uri)
        jvm = self.spark.sparkContext._jvm
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        base = str(fs.makeQualified(path).toUri().getPath()).rstrip("/") + "/"
        found = []
        listing = fs.listFiles(path, True)
        while listing.hasNext():
            status = listing.next()
            relative = str(status.getPath().toUri().getPath())[len(base) :]
            if proof.is_data_file(relative):
                reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(
                    jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromStatus(status, conf)
                )
                try:
                    blocks = reader.getFooter().getBlocks()
                finally:
                    reader.close()
                found.append({"path": relative, "row_groups": [_row_group(block) for block in blocks]})
        return found

    def write_report(self, staging_uri: str, text: str) -> None:
        path, fs = hadoop_path(self.spark, staging_uri.rstrip("/") + "/" + contract.REPORT_NAME)
        stream = fs.create(path, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


def _row_group(block) -> dict:
    """A row group's record count, (min, max, nulls) of the proof's columns and its key + value bytes, from
    parquet-java's metadata."""
    columns = {}
    sizes: dict[str, int | None] = {}
    for chunk in block.getColumns():
        name = str(chunk.getPath().toDotString())
        if name in proof.PAYLOAD_COLUMNS:
            sizes[name] = _unencoded_bytes(chunk)
        if name not in proof.FOOTER_COLUMNS:
            continue
        stats = chunk.getStatistics()
        nulls = int(stats.getNumNulls()) if stats.isNumNullsSet() else None
        if not stats.hasNonNullValue():
            columns[name] = [None, None, nulls]
            continue
        low, high = stats.genericGetMin(), stats.genericGetMax()
        if name == "topic":  # a Binary
            low, high = str(low.toStringUsingUTF8()), str(high.toStringUsingUTF8())
        columns[name] = [low, high, nulls]
    return {"records": int(block.getRowCount()), "columns": columns, "payload_bytes": proof.payload_bytes(sizes)}


def _unencoded_bytes(chunk) -> int | None:
    """A byte-array column chunk's unencoded bytes (Parquet's size statistics); None before parquet-java 1.14
    (Spark 3.5) or when the writer did not record them."""
    from py4j.protocol import Py4JError  # spark-submit's driver: py4j is there

    try:
        stats = chunk.getSizeStatistics()
    except Py4JError:  # parquet-java 1.13: no such method
        return None
    if stats is None or not stats.isValid():
        return None
    found = stats.getUnencodedByteArrayDataBytes()
    return int(found.get()) if found.isPresent() else None


def hadoop_path(spark: SparkSession, uri: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def min_partitions(runtime: Runtime, job: dict) -> int | None:
    """The job's min_partitions, or None for one task per range, or more tasks when that leaves cores idle."""
    return wanted_partitions(job["ranges"], runtime.parallelism(), job.get("min_partitions"))


def wanted_partitions(ranges: list[dict], parallelism: int, configured: int | None) -> int | None:
    """Spark's ``minPartitions`` for the Kafka source: None keeps Spark's one task per range.

    By default Spark reads each Kafka partition in one task: a batch of fewer partitions than cores,
    or one long range, then runs on a few cores. Without a setting in the job, ask for at least
    one task per core and per RECORDS_PER_TASK planned offsets; Spark splits the larger ranges.
    """
    if configured:
        return int(configured)
    offsets = sum(int(r["end"]) - int(r["start"]) for r in ranges)
    wanted = max(parallelism, math.ceil(offsets / RECORDS_PER_TASK))
    return wanted if wanted > len(ranges) else None


def reader_options(job: dict, tasks: int | None) -> dict[str, str]:
    """The Kafka source's options for the job's exact ranges: read-tuned client defaults, then the
    job's client settings (which win), then read_committed (which nothing can weaken)."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for rng in job["ranges"]:
        assign.setdefault(rng["topic"], []).append(int(rng["partition"]))
        starting.setdefault(rng["topic"], {})[str(rng["partition"])] = int(rng["start"])
        ending.setdefault(rng["topic"], {})[str(rng["partition"])] = int(rng["end"])
    options = {
        "assign": json.dumps(assign),
        "startingOffsets": json.dumps(starting),
        "endingOffsets": json.dumps(ending),
        "includeHeaders": "true",
        "failOnDataLoss": "true",
    }
    if tasks:
        options["minPartitions"] = str(tasks)
    client = {**READ_DEFAULTS, **{key: str(value) for key, value in job["kafka"].items()}}
    options.update({f"kafka.{key}": value for key, value in client.items()})
    options["kafka.isolation.level"] = "read_committed"
    return options


V1_SOURCES = "spark.sql.sources.useV1SourceList"


def use_kafka_scan(spark: SparkSession) -> None:
    """Read Kafka through its DataSource V2 scan, the reader Structured Streaming uses.

    Spark lists ``kafka`` in ``spark.sql.sources.useV1SourceList``, so a batch read goes through the
    older relation by default: on a warm Spark Connect server, the same 1M-record write took 10-15%
    less CPU and wall time with the scan (benchmarks/README.md). The session is the batch's own.
    """
    sources = [s for s in str(spark.conf.get(V1_SOURCES)).split(",") if s.strip() and s.strip().lower() != "kafka"]
    spark.conf.set(V1_SOURCES, ",".join(sources))


def read_ranges(spark: SparkSession, job: dict, runtime: Runtime) -> DataFrame:
    options = reader_options(job, min_partitions(runtime, job))
    use_kafka_scan(spark)
    return spark.read.format("kafka").options(**options).load().select(*COLUMNS)
