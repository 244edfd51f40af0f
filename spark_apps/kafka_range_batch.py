"""Read exact Kafka offset ranges with Spark and stage them as Parquet.

Submitted by airflow-kafka-offsets through spark-submit (``main``, the driver's JVM at hand:
:class:`JvmRuntime`), or, with a Spark Connect connection, imported by the package and
run in the worker's process against the Connect server (``run`` with the package's
runtime; the Kafka read and the Parquet write run on the server). It imports nothing
from Airflow (executors and cluster drivers do not have it) and shares only
two documented JSON formats with the package, defined with the names and the range check
in ``kafka_batch_contract.py`` beside it:

job file (argument ``--job-file``, shipped with ``--files``; private: it holds
the Kafka client settings, so secrets never reach the command line)::

    {"format": 1, "pipeline": str, "batch_id": int, "attempt_id": str,
     "staging_uri": str, "min_partitions": int | null,
     "decode": {"format": "json", "schema": "<Spark DDL>"}
             | {"format": "avro", "schema": "<Spark DDL of the reader schema>",
                "reader": {"subject", "version", "schema_id", "schema": "<Avro JSON>"}, ...}
             | null,
     "partition_by": "day" | null,   # optional: one directory per UTC day of the timestamp
     "routing": {"topics": {topic: table}, "header": str | null, "prefix": str, "suffix": str,
                 "allow": [table], "fallback": table | null} | null,   # optional: many tables
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
     "routing": {"tables": {table: records}, "unrouted": int, "unrouted_values": [str | null]}}
                                                  # only with routing

With routing, the output has one directory per table, ``_kafka_offsets_table=<table>/``
(records without a route: Spark's default partition directory), and the records without a route
are also written to ``<staging_uri>/_errors/`` with their offsets.

``min_partitions`` null lets the app choose: enough Spark tasks for every core of the
application and about one task per million records (a Kafka range is split when that is
more tasks than ranges; Spark's default is one task per Kafka partition).

With decode, the output gains ``decoded`` (struct, null when undecodable) and
``decode_error`` (null, or why), and undecodable records are also written to
``<staging_uri>/_errors/`` with their offsets. Raw ``key``/``value`` are always kept.

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
from collections.abc import Callable, Iterable
from typing import Protocol

from pyspark import SparkFiles
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): the contract is its sibling module
    from . import kafka_batch_contract as contract
else:  # spark-submit ships the contract beside this file (--py-files)
    import kafka_batch_contract as contract

CORRUPT = "_corrupt_record"
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
RECORDS_PER_TASK = 1_000_000  # default split of long Kafka ranges (min_partitions null)
# Kafka client settings for reading ranges that already exist (a setting in the connection wins):
# no wait at the broker for more data. With the Java client's 500 ms, the fetches that reach the
# end of a range's data wait out the 500 ms, about 1 s of every small batch (10,000 records on a
# warm Spark Connect server: the read + write job 1.38 s -> 0.44 s, with or without transaction
# markers and aborted records). The data of a planned range is there; nothing is waited for.
# And 5,000 records per poll instead of 500, with the client's fetch sizes: Spark's reader
# polls a tenth as often (the Kafka read of 1M records alone 2.9 s instead of 3.6 s on a warm JVM;
# whole batches on a warm Spark Connect server 5.85 s instead of 6.15 s, medians of 6 interleaved).
# Larger fetches too (20,000 records per poll, 8 MiB per partition) read no faster than this but
# ran a 5M-record batch out of memory in a 1 GiB local driver: left to the connection.
# (benchmarks/README.md, "Where the time of a small Spark Connect batch goes" and "Throughput on a
# warm Spark Connect server")
READ_DEFAULTS = {"fetch.max.wait.ms": "0", "max.poll.records": "5000"}
# A batch of at most this many planned offsets is checked from its collected rows: one Spark job
# without a shuffle instead of the aggregate's three stages. On a warm Spark Connect server
# (medians, seconds, collected against aggregate): 10,000 records 0.24-0.30 against 0.45-0.63,
# 30,000 0.48-0.51 against 0.60-0.70, 100,000 0.99-1.29 against 0.72-0.78 (benchmarks/README.md).
COLLECTED_CHECK_MAX_OFFSETS = 50_000
# Parquet dictionaries for the columns that hold a new value in nearly every record cost the writer
# CPU for nothing (it falls back to plain pages): about 8% of a 1M-record write's CPU on a Connect server.
WRITE_OPTIONS = {f"parquet.enable.dictionary#{column}": "false" for column in ("value", "offset", "timestamp")}
# A larger batch of at most this many ranges counts its key + value bytes while it is written.
OBSERVED_PAYLOAD_MAX_RANGES = 256


class BatchCheckError(RuntimeError):
    """What was written does not match the requested ranges."""


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

    if pyspark.__version__ != spark.version:
        raise RuntimeError(
            f"pyspark {pyspark.__version__} drives Spark {spark.version}: the Python files do not match the "
            "JVM (pyspark-client installed over pyspark?); reinstall pyspark at Spark's version"
        )


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


def read_ranges(spark: SparkSession, job: dict, runtime: Runtime) -> DataFrame:
    options = reader_options(job, min_partitions(runtime, job))
    return spark.read.format("kafka").options(**options).load().select(*COLUMNS)


def utf8_check(spark_version: str) -> str:
    """A SQL expression true when ``value`` is valid UTF-8. ``is_valid_utf8`` is Spark 4's; on Spark 3
    a string cast keeps the bytes and encoding it back replaces invalid ones, so the bytes differ."""
    if int(contract.spark_release(spark_version).split(".")[0]) >= 4:
        return "is_valid_utf8(CAST(value AS STRING))"
    return "encode(CAST(value AS STRING), 'UTF-8') = value"


def with_decoded(df: DataFrame, schema: str, spark_version: str) -> DataFrame:
    """Add ``decoded`` (the value parsed as JSON with ``schema``) and ``decode_error`` (why not).

    The raw ``value`` stays untouched; a tombstone (null value) is not an error.
    """
    parsed = F.from_json(
        F.col("value").cast("string"),
        f"{schema}, `{CORRUPT}` STRING",
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT},
    )
    error = (
        F.when(F.col("value").isNull(), F.lit(None))
        .when(~F.expr(utf8_check(spark_version)), F.lit("value is not valid UTF-8"))
        .when(parsed.isNull(), F.lit("value is not a JSON object"))
        .when(parsed[CORRUPT].isNotNull(), F.lit("value does not match the JSON schema"))
    )
    return (
        df.withColumn("_parsed", parsed)
        .withColumn("decode_error", error)
        .withColumn("decoded", F.when(F.col("decode_error").isNull(), F.col("_parsed").dropFields(CORRUPT)))
        .drop("_parsed")
    )


# Avro in the Confluent wire format, as Spark SQL over the binary ``value``.
SCHEMA_ID = "CAST(conv(hex(substring(value, 2, 4)), 16, 10) AS BIGINT)"
PAYLOAD = f"substring(value, {contract.WIRE_HEADER_BYTES + 1})"
# A record whose writer schema is named by GUID in a header (Confluent's header form: not read, kept as an error).
# (array_contains, not exists with a lambda: Spark generates code for it, not for higher-order functions)
GUID_HEADER = f"coalesce(array_contains(headers.key, '{contract.GUID_HEADER}'), false)"


def _text(prefix_suffix: tuple[str, str], middle: Column) -> Column:
    return F.concat(F.lit(prefix_suffix[0]), middle, F.lit(prefix_suffix[1]))


class AvroWriters:
    """The writer schemas an Avro batch decodes with, fetched from the registry on the driver (or the Connect
    client).

    Up front, the reader subject's newest versions: a few requests, no pass over the records. A record whose
    id is not among them gets "unknown schema id" in the first write, which counts those ids as it goes
    (:func:`late_writer_ids`); :meth:`learn` then asks the registry for them, and when it knows one the batch
    is written again with it, so the output is what decoding with every id known up front gives.
    """

    def __init__(
        self,
        registry: dict,
        subject: str,
        fetch_subject: Callable[..., tuple] = contract.fetch_subject_writer_schemas,
        fetch_ids: Callable[..., tuple] = contract.fetch_writer_schemas,
    ) -> None:
        self.registry = registry
        self.fetch_ids = fetch_ids
        self.avro, self.other = fetch_subject(registry, subject)
        self.asked = set(self.avro) | set(self.other)

    def learn(self, seen: Iterable[int]) -> bool:
        """Fetch the ids records carried that were not asked for yet; True when the registry knows one of them."""
        new = {int(i) for i in seen} - self.asked
        if not new:
            return False
        avro, other, _unknown = self.fetch_ids(self.registry, new)
        self.asked |= new
        self.avro.update(avro)
        self.other.update(other)
        return bool(avro or other)


def late_writer_ids(df: DataFrame) -> tuple[DataFrame, Callable[[], list[int]]]:
    """``df`` counting, while it is written, the writer schema ids its records carry that the decode did not
    know (an observed metric: no pass of its own), and how to get them after the write."""
    from pyspark.sql import Observation

    observation = Observation("kafka_offsets_late_writer_ids")
    unknown = F.col("decode_error").startswith(contract.UNKNOWN_SCHEMA_ID[0])
    # as text: Spark 3.5 and 4.0's classic Observation hands an array back as a Java object
    ids = F.array_join(F.collect_set(F.when(unknown, F.expr(SCHEMA_ID).cast("string"))), ",")
    observed = df.observe(observation, ids.alias("ids"))
    return observed, lambda: sorted(int(i) for i in str(observation.get["ids"] or "").split(",") if i)


def with_avro_decoded(df: DataFrame, decode: dict, writers: AvroWriters) -> DataFrame:
    """Add ``decoded`` (the value decoded by its writer schema into the reader schema's shape, typed as the
    job's DDL) and ``decode_error`` (unknown magic byte, unknown schema id, a payload that does not decode).

    One CASE over the writer schema ids picks each record's ``from_avro``, so the Kafka read stays one pass.
    """
    from pyspark.sql.avro.functions import from_avro

    reader, marker = contract.marked_reader_schema(decode["reader"]["schema"])
    schema_id = F.expr(SCHEMA_ID)
    parsed: Column | None = None
    for writer_id, writer in sorted(writers.avro.items()):
        branch = from_avro(F.expr(PAYLOAD), writer, {"avroSchema": reader, "mode": "PERMISSIVE"})
        parsed = (
            F.when(schema_id == writer_id, branch) if parsed is None else parsed.when(schema_id == writer_id, branch)
        )
    known = F.lit(False) if not writers.avro else schema_id.isin(sorted(writers.avro))
    error = (
        F.when(F.col("value").isNull(), F.lit(None))
        .when(F.expr(GUID_HEADER), F.lit(contract.GUID_FORM))
        .when(F.length("value") == 0, F.lit(contract.EMPTY_VALUE))
        .when(
            F.expr("substring(value, 1, 1) <> X'00'"),
            _text(contract.UNKNOWN_MAGIC, F.lower(F.hex(F.expr("substring(value, 1, 1)")))),
        )
        .when(F.length("value") < contract.WIRE_HEADER_BYTES, F.lit(contract.SHORT_HEADER))
    )
    for other_id, kind in sorted(writers.other.items()):
        error = error.when(schema_id == other_id, F.lit(contract.not_avro(other_id, kind)))
    error = error.when(~known, _text(contract.UNKNOWN_SCHEMA_ID, schema_id.cast("string")))
    if parsed is not None:
        error = error.when(F.col("_parsed")[marker].isNull(), _text(contract.UNDECODABLE, schema_id.cast("string")))
        decoded = F.when(
            F.col("decode_error").isNull(), F.col("_parsed").dropFields(marker).cast(f"STRUCT<{decode['schema']}>")
        )
    else:  # none of the registry's writer schemas known so far is Avro
        decoded = F.lit(None).cast(f"STRUCT<{decode['schema']}>")
    out = df.withColumn("_parsed", parsed if parsed is not None else F.lit(None)).withColumn("decode_error", error)
    return out.withColumn("decoded", decoded).drop("_parsed")


def write_decoded(records: DataFrame, job: dict, spark_version: str) -> tuple[DataFrame, Callable[[], dict] | None]:
    """Decode the records as the job says (JSON with its DDL schema, or Avro through the schema registry) and
    write them (:func:`write_staged`, whose result it gives).

    Avro: a write that met writer schema ids the registry knows but the decode did not is done again with
    them (:class:`AvroWriters`); the Kafka ranges are then read a second time.
    """
    decode = job["decode"]
    if decode.get("format", "json") != "avro":
        return write_staged(with_decoded(records, decode["schema"], spark_version), job)
    registry = job.get(contract.REGISTRY_ACCESS)
    if not registry:
        raise ValueError("the job decodes Avro values but gives no schema registry access")
    writers = AvroWriters(registry, decode["reader"]["subject"])
    while True:
        decoded, late_ids = late_writer_ids(with_avro_decoded(records, decode, writers))
        staged = write_staged(decoded, job)
        if not writers.learn(late_ids()):
            return staged


def planned_offsets(job: dict) -> int:
    return sum(int(r["end"]) - int(r["start"]) for r in job["ranges"])


def payload_bytes() -> Column:
    return F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))


def read_back_check(job: dict) -> Callable[..., list[dict]]:
    """How the batch's written files are summarized: from collected rows when it is small."""
    return summarize_collected if planned_offsets(job) <= COLLECTED_CHECK_MAX_OFFSETS else summarize


def summarize_collected(written: DataFrame, decoding: bool = False, payload: None = None) -> list[dict]:
    """:func:`summarize` of a small batch, computed on the driver from the rows' offsets and sizes."""
    decode_error = F.col("decode_error").isNotNull() if decoding else F.lit(False)
    rows = written.select("topic", "partition", "offset", payload_bytes(), decode_error).collect()
    return contract.summarize_rows((tuple(row) for row in rows), decoding)


def summarize(
    written: DataFrame, decoding: bool = False, payload: Callable[[], dict[tuple[str, int], int]] | None = None
) -> list[dict]:
    """Per topic partition: records, min and max offset, distinct offsets, key + value bytes (+ decode errors).

    Distinct offsets are counted exactly without shuffling every offset (as countDistinct does):
    offsets are grouped in blocks of 64 (``offset >> 6``), each block ORs ``1 << (offset & 63)``
    into a 64-bit mask, and the bits set in a block's mask are its distinct offsets (a repeated
    offset sets no new bit). Consecutive offsets collapse 64 to 1 before the shuffle.
    With ``payload`` (the bytes counted while the write ran) only the offsets' columns are read
    back: the keys and values, nearly all of the files, are not read again.
    """
    per_block = [
        F.count(F.lit(1)).alias("records"),
        F.min("offset").alias("min_offset"),
        F.max("offset").alias("max_offset"),
        F.expr("bit_or(shiftleft(1L, CAST(offset & 63 AS INT)))").alias("offset_bits"),
    ]
    per_partition = [
        F.sum("records").alias("records"),
        F.min("min_offset").alias("min_offset"),
        F.max("max_offset").alias("max_offset"),
        F.sum(F.expr("bit_count(offset_bits)")).alias("distinct_offsets"),
    ]
    if payload is None:
        per_block.append(F.sum(payload_bytes()).alias("payload_bytes"))
        per_partition.append(F.sum("payload_bytes").alias("payload_bytes"))
    if decoding:
        per_block.append(F.count("decode_error").alias("decode_errors"))
        per_partition.append(F.sum("decode_errors").alias("decode_errors"))
    blocks = written.groupBy("topic", "partition", F.shiftright("offset", 6).alias("offset_block")).agg(*per_block)
    rows = blocks.groupBy("topic", "partition").agg(*per_partition).collect()
    partitions = sorted((row.asDict() for row in rows), key=lambda r: (r["topic"], r["partition"]))
    if payload is not None:
        counted = payload()
        for part in partitions:
            part["payload_bytes"] = counted.get((part["topic"], part["partition"]), 0)
    return partitions


def with_payload_metric(
    records: DataFrame, job: dict
) -> tuple[DataFrame, Callable[[], dict[tuple[str, int], int]] | None]:
    """The records with their key + value bytes per planned range counted as the write runs (an
    observed metric), and how to get the counts after it; no metric for a batch of many ranges
    (one sum per range) or one small enough to be checked from its collected rows."""
    ranges = sorted({(str(r["topic"]), int(r["partition"])) for r in job["ranges"]})
    if planned_offsets(job) <= COLLECTED_CHECK_MAX_OFFSETS or len(ranges) > OBSERVED_PAYLOAD_MAX_RANGES:
        return records, None
    from pyspark.sql import Observation

    observation = Observation("kafka_batch_payload_bytes")
    size = payload_bytes()
    sums = [
        F.sum(F.when((F.col("topic") == F.lit(topic)) & (F.col("partition") == F.lit(partition)), size)).alias(
            f"range_{index}"
        )
        for index, (topic, partition) in enumerate(ranges)
    ]

    def counted() -> dict[tuple[str, int], int]:
        metrics = observation.get
        return {key: int(metrics.get(f"range_{index}") or 0) for index, key in enumerate(ranges)}

    return records.observe(observation, *sums), counted


def check_against_ranges(job: dict, partitions: list[dict]) -> None:
    """Every offset inside its range, none twice; gaps (markers, compaction) are allowed."""
    problems = contract.range_problems(job["ranges"], partitions)
    if problems:
        raise BatchCheckError("; ".join(problems))


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
    """Records per table, and how many had no route (with up to 10 of their header values)."""
    counts = {row[0]: int(row[1]) for row in written.groupBy(contract.TABLE_COLUMN).count().collect()}
    unrouted = counts.pop(None, 0)
    values: list[str | None] = []
    if unrouted and routing.get("header"):
        named = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(routing["header"]))
        rows = written.where(F.col(contract.TABLE_COLUMN).isNull()).select(
            F.try_element_at(named, F.lit(1))["value"].cast("string")
        )
        values = sorted((row[0] for row in rows.distinct().limit(10).collect()), key=lambda v: (v is None, v or ""))
    return {"tables": dict(sorted(counts.items())), "unrouted": unrouted, "unrouted_values": values}


def write_errors(written: DataFrame, staging: str, decode: dict | None, routing: dict | None) -> None:
    """Records that did not decode, or have no table, with their offsets, to ``<staging>/_errors/``."""
    columns = [F.col(c) for c in ("topic", "partition", "offset", "timestamp", "key", "value")]
    failed = F.lit(False)
    if decode:
        columns.append(F.col("decode_error"))
        failed = F.col("decode_error").isNotNull()
    if routing:
        no_route = F.col(contract.TABLE_COLUMN).isNull()
        columns.append(F.when(no_route, F.lit(contract.NO_ROUTE)).alias("route_error"))
        failed = failed | no_route
    written.where(failed).select(*columns).write.mode("overwrite").parquet(
        staging.rstrip("/") + "/" + contract.ERRORS_DIR
    )


def write_staged(records: DataFrame, job: dict) -> tuple[DataFrame, Callable[[], dict] | None]:
    """Write the records to the job's staging location (a directory per table or per day when asked); the
    frame written and how to get its payload metric (:func:`with_payload_metric`)."""
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
    records, payload = with_payload_metric(records, job)
    writer = records.write.mode("overwrite").options(**WRITE_OPTIONS)
    (writer.partitionBy(*partition_columns) if partition_columns else writer).parquet(job["staging_uri"])
    return records, payload


def run(job: dict, spark: SparkSession, runtime: Runtime) -> dict:
    runtime.check_versions()
    staging = job["staging_uri"]
    decode = job.get("decode")
    routing = job.get("routing")
    records = read_ranges(spark, job, runtime)
    records, payload = write_decoded(records, job, spark.version) if decode else write_staged(records, job)
    # Read back what was written (the checks are on the files), with the known schema: no footer-reading job.
    written = spark.read.schema(records.schema).parquet(staging)
    partitions = read_back_check(job)(written, decoding=bool(decode), payload=payload)
    check_against_ranges(job, partitions)
    if decode or routing:
        write_errors(written, staging, decode, routing)
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
