"""Read exact Kafka offset ranges with Spark and stage them as Parquet.

Submitted by airflow-kafka-offsets through spark-submit (``main``, the driver's JVM at hand:
:class:`JvmRuntime`), or, with a Spark Connect connection, imported by the package and
run in the worker's process against the Connect server (``run`` with the package's
runtime; the Kafka read and the Parquet write run on the server). It imports nothing
from Airflow (executors and cluster drivers do not have it) and shares only
two documented JSON formats with the package, defined with the names and the range check
in ``kafka_batch_contract.py`` beside it. Its other modules, shipped beside it with ``--py-files``
too: ``kafka_batch_decode.py`` (the JSON and Avro decode step), ``kafka_batch_avro.py`` (the Confluent
wire format and the schema registry's answers) and ``kafka_batch_check.py`` (the read-back check):

job file (argument ``--job-file``, shipped with ``--files``; private: it holds
the Kafka client settings, so secrets never reach the command line)::

    {"format": 1, "pipeline": str, "batch_id": int, "attempt_id": str,
     "staging_uri": str, "min_partitions": int | null,
     "decode": {"format": "json", "schema": "<Spark DDL>", "keep_raw_value": false (optional)}
             | {"format": "avro", "schema": "<Spark DDL of the reader schema>",
                "reader": {"subject", "version", "schema_id", "schema": "<Avro JSON>"}, ...}
             | null,
     "partition_by": "day" | null,   # optional: one directory per UTC day of the timestamp
     "routing": {"topics": {topic: table}, "header": str | null, "prefix": str, "suffix": str,
                 "allow": [table], "fallback": table | null} | null,   # optional: many tables
     "merge": {"key": [column], "changes": "debezium" | "upsert"} | null,   # optional: a mirror table
     "ranges": [{"topic": str, "partition": int, "start": int, "end": int}],
     "kafka": {"bootstrap.servers": ..., ...},       # Java client properties
     "private_conf": {"spark.hadoop.fs.s3a.secret.key": ..., ...},   # set on the Hadoop configuration
     "schema_registry": {"urls": [...], "basic_auth": ..., ...}}      # Avro: where writer schemas are

report (``<staging_uri>/_kafka_batch_report.json``, written last)::

    {"format": 1, "pipeline", "batch_id", "attempt_id", "spark_version",
     "application_id", "master", "output_bytes",
     "partitions": [{"topic", "partition", "records", "min_offset",
                     "max_offset", "distinct_offsets", "payload_bytes",
                     "decode_errors" (only with decode)}],
     "routing": {"tables": {table: records}, "unrouted": int, "unrouted_values": [str | null],
                 "landed": {table: [{"topic", "partition", "start", "end", "records"}]}},
                                                  # only with routing; landed: per table and
                                                  # partition, its records' offsets lie in [start, end)
     "changes": {"changes": int, "deletes": int}}  # only with merge

With merge, the decode's schema is the row's (for Debezium, wrapped in its envelope by the package), and
the batch's change set, the last change per key, is also written to ``<staging_uri>/_changes/``
(``kafka_batch_changes.py``): the table sink applies it to the mirror table in its commit.

With routing, the output has one directory per table, ``_kafka_offsets_table=<table>/``
(records without a route: Spark's default partition directory), and the records without a route
are also written to ``<staging_uri>/_errors/`` with their offsets.

``min_partitions`` null lets the app choose: enough Spark tasks for every core of the
application and about one task per million records (a Kafka range is split when that is
more tasks than ranges; Spark's default is one task per Kafka partition).

With decode, the output gains ``decoded`` (struct, null when undecodable) and
``decode_error`` (null, or why), and undecodable records are also written to
``<staging_uri>/_errors/`` with their offsets. Raw ``key``/``value`` are kept, unless the decode says
``"keep_raw_value": false``: then ``value`` is written only for the records that did not decode.

Avro values (Confluent wire format: magic byte 0, a 4-byte writer schema id, the Avro binary) are
decoded by their writer schema into the reader schema's shape: the writer schemas of the reader subject's
newest versions are fetched from the registry before the read (plain HTTP, the job's private access), and
Spark's ``from_avro`` (``spark-avro``) decodes each record with its writer schema and the batch's reader
schema (older writers get the reader's defaults). The write counts the ids it met beyond those (an
observed metric); when the registry knows one, it is fetched and the batch written again with it.
Records in Confluent's header form (the writer schema's GUID in header ``__value_schema_id``) are kept
as errors: writer schemas are fetched by id only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Protocol

from pyspark import SparkFiles
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): its modules are siblings
    from . import kafka_batch_changes as changes_step
    from . import kafka_batch_check as check
    from . import kafka_batch_contract as contract
    from . import kafka_batch_decode as decode_step
else:  # spark-submit ships them beside this file (--py-files)
    import kafka_batch_changes as changes_step
    import kafka_batch_check as check
    import kafka_batch_contract as contract
    import kafka_batch_decode as decode_step

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
# Parquet dictionaries for the columns that hold a new value in nearly every record cost the writer
# CPU for nothing (it falls back to plain pages): about 8% of a 1M-record write's CPU on a Connect server.
# Other columns (a decoded value's fields) keep theirs up to 32 KiB instead of Parquet's 1 MiB: a column of
# more distinct values falls back to plain sooner, with the same files when it would have anyway (1M
# decoded Avro records: 7.5 CPU s against 8.3 with 1 MiB, the same 231.8 MB; a raw batch unchanged).
WRITE_OPTIONS = {f"parquet.enable.dictionary#{column}": "false" for column in ("value", "offset", "timestamp")}
WRITE_OPTIONS["parquet.dictionary.page.size"] = str(32 * 1024)


def load_job(job_file: str) -> dict:
    """The job file arrives through --files (cluster modes) or as a local path (client mode)."""
    candidates = [job_file]
    try:
        candidates.insert(0, SparkFiles.get(os.path.basename(job_file)))
    except Exception:  # no SparkContext files directory yet
        pass
    for path in candidates:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                job = json.load(handle)
            if job.get("format") != contract.JOB_FORMAT:
                raise ValueError(f"unsupported job format {job.get('format')!r}, expected {contract.JOB_FORMAT}")
            return job
    raise FileNotFoundError(f"job file {job_file} not found (looked in {candidates})")


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

    def write_report(self, staging_uri: str, text: str) -> None:
        path, fs = hadoop_path(self.spark, staging_uri.rstrip("/") + "/" + contract.REPORT_NAME)
        stream = fs.create(path, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


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


def hadoop_path(spark: SparkSession, uri: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def route_column(routing: dict) -> Column:
    """The table each record lands in (null: no route), as ``TableRoutes.table_for`` in the package says.

    A mapped topic goes to its table; the others to ``prefix + <header value> + suffix`` when that
    table is allowed, else to the fallback table (null without one).
    """
    routed: Column = F.lit(None).cast("string")
    if routing.get("header"):
        named = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(routing["header"]))
        value = F.try_element_at(named, F.lit(1))["value"].cast("string")
        table = F.concat(F.lit(routing["prefix"]), value, F.lit(routing["suffix"]))
        allowed = table.isin(list(routing["allow"]))
        routed = F.when(allowed, table).otherwise(F.lit(routing.get("fallback")).cast("string"))
    for topic, name in sorted(routing["topics"].items(), reverse=True):
        routed = F.when(F.col("topic") == F.lit(topic), F.lit(name)).otherwise(routed)
    return routed


def route_report(written: DataFrame, routing: dict) -> dict:
    """Records per table and where in each partition they are, and how many had no route (with up to 10
    of their header values)."""
    per_partition = (
        written.groupBy(contract.TABLE_COLUMN, "topic", "partition")
        .agg(F.count(F.lit(1)).alias("n"), F.min("offset").alias("first"), F.max("offset").alias("last"))
        .collect()
    )
    counts: dict[str | None, int] = {}
    landed: dict[str, list[dict]] = {}
    for row in sorted(per_partition, key=lambda r: (r[0] is None, r[0] or "", r["topic"], r["partition"])):
        counts[row[0]] = counts.get(row[0], 0) + int(row["n"])
        if row[0] is not None:
            landed.setdefault(row[0], []).append(
                {
                    "topic": row["topic"],
                    "partition": int(row["partition"]),
                    "start": int(row["first"]),
                    "end": int(row["last"]) + 1,
                    "records": int(row["n"]),
                }
            )
    unrouted = counts.pop(None, 0)
    values: list[str | None] = []
    if unrouted and routing.get("header"):
        named = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(routing["header"]))
        rows = written.where(F.col(contract.TABLE_COLUMN).isNull()).select(
            F.try_element_at(named, F.lit(1))["value"].cast("string")
        )
        values = sorted((row[0] for row in rows.distinct().limit(10).collect()), key=lambda v: (v is None, v or ""))
    tables = {str(t): n for t, n in sorted(counts.items(), key=lambda kv: str(kv[0]))}
    return {"tables": tables, "unrouted": unrouted, "unrouted_values": values, "landed": landed}


def write_errors(written: DataFrame, staging: str, decode: dict | None, routing: dict | None, undecoded: int) -> None:
    """Records that did not decode (``undecoded``: none, no scan) or have no table, to ``<staging>/_errors/``."""
    columns = [F.col(c) for c in ("topic", "partition", "offset", "timestamp", "key", "value")]
    failed = F.lit(False)
    if decode:
        columns.append(F.col("decode_error"))
        failed = F.col("decode_error").isNotNull() if undecoded else F.lit(False)
    if routing:
        no_route = F.col(contract.TABLE_COLUMN).isNull()
        columns.append(F.when(no_route, F.lit(contract.NO_ROUTE)).alias("route_error"))
        failed = failed | no_route
    written.where(failed).select(*columns).write.mode("overwrite").parquet(
        staging.rstrip("/") + "/" + contract.ERRORS_DIR
    )


def write_staged(records: DataFrame, job: dict) -> tuple[DataFrame, Callable[[], dict] | None]:
    """Write the records to the job's staging location (a directory per table or per day when asked); the
    frame written and how to get its payload metric (:func:`kafka_batch_check.with_payload_metric`)."""
    routing = job.get("routing")
    partition_columns: list[str] = []
    if routing:
        # One write for every table: a directory per table (no route: Spark's default partition).
        records = records.withColumn(contract.TABLE_COLUMN, route_column(routing))
        partition_columns = [contract.TABLE_COLUMN]
    elif job.get("partition_by") == "day":
        # The UTC day whatever the session time zone: Iceberg's day() transform and Delta's
        # partition values are computed the same way.
        records = records.withColumn(
            contract.DAY_COLUMN, F.expr("date_from_unix_date(CAST(floor(unix_micros(timestamp) / 86400000000) AS INT))")
        )
        partition_columns = [contract.DAY_COLUMN]
    records, payload = check.with_payload_metric(records, job)
    if not contract.keeps_raw_values(job):  # the decoded content is in `decoded`; after the bytes are counted
        records = records.withColumn("value", F.when(F.col("decode_error").isNotNull(), F.col("value")))
    writer = records.write.mode("overwrite").options(**WRITE_OPTIONS)
    (writer.partitionBy(*partition_columns) if partition_columns else writer).parquet(job["staging_uri"])
    return records, payload


def run(job: dict, spark: SparkSession, runtime: Runtime) -> dict:
    runtime.check_versions()
    staging = job["staging_uri"]
    decode = job.get("decode")
    routing = job.get("routing")
    read = read_ranges(spark, job, runtime)
    records, payload = (
        decode_step.write_decoded(read, job, spark.version, write_staged) if decode else write_staged(read, job)
    )
    if payload is None and not contract.keeps_raw_values(job):
        payload = check.counted_from_read(read)
    # Read back what was written (the checks are on the files), with the known schema: no footer-reading job.
    written = spark.read.schema(records.schema).parquet(staging)
    partitions = check.read_back_check(job)(written, decoding=bool(decode), payload=payload)
    check.check_against_ranges(job, partitions)
    if decode or routing:
        write_errors(written, staging, decode, routing, sum(p.get("decode_errors") or 0 for p in partitions))
    merged = changes_step.write_changes(written, job) if job.get("merge") else None
    report = {
        "format": contract.REPORT_FORMAT,
        "pipeline": job["pipeline"],
        "batch_id": job["batch_id"],
        "attempt_id": job["attempt_id"],
        "spark_version": spark.version,
        "application_id": spark.conf.get("spark.app.id"),
        "master": spark.conf.get("spark.master"),
        "output_bytes": runtime.output_bytes(staging),
        "partitions": partitions,
        **({"routing": route_report(written, routing)} if routing else {}),
        **({"changes": merged} if merged is not None else {}),
    }
    runtime.write_report(staging, json.dumps(report, sort_keys=True))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-file", required=True)
    args = parser.parse_args(argv)
    spark = SparkSession.builder.getOrCreate()
    try:
        job = load_job(args.job_file)
        contract.apply_private_conf(job, spark.sparkContext._jsc.hadoopConfiguration())
        report = run(job, spark, JvmRuntime(spark))
        records = sum(p["records"] for p in report["partitions"])
        print(f"kafka_range_batch: {job['pipeline']} batch {job['batch_id']}: {records} records staged", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
