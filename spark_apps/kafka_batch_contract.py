"""The contract between airflow-kafka-offsets and its Spark app: formats, names and the range check.

The Avro wire format and the schema registry's answers are in ``kafka_batch_avro.py`` beside it.

Plain Python with no imports beyond the standard library, so that the app (which runs where
Airflow is not installed) and the package (``airflow_kafka_offsets.spark_apps.kafka_batch_contract``)
share one copy. spark-submit ships this file next to the app with ``--py-files``.

The two JSON formats the package and the app share (``JOB_FORMAT``, ``REPORT_FORMAT``):

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
     "merge": {"key": [column], "changes": "debezium" | "upsert",
               "rewrite": {"base": str | null,
                           "files": [{"path": str, "lower": scalar | null, "upper": scalar | null}]}
                          (optional: an Iceberg or Delta mirror, below)} | null,   # optional: a mirror table
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
     "changes": {"changes": int, "deletes": int,   # only with merge
                 "rewrite": {"base": str | null,       # only with merge.rewrite
                             "files": [{"path": str, "place": int, "removed": int}]}}}

With merge, the decode's schema is the row's (for Debezium as JSON, wrapped in its envelope by the package;
for Debezium as Avro, the reader schema is the envelope Debezium's converter registered), and
the batch's change set, the last change per key, is also written to ``<staging_uri>/_changes/``
(``kafka_batch_changes.py``): the table sink applies it to the mirror table in its commit.

With ``merge.rewrite`` (an Iceberg or Delta mirror) the app also rewrites, copy-on-write, the mirror's data files
that hold a changed key (``kafka_batch_rewrite.py``): ``files`` are the table's live data files at ``base`` (an
Iceberg snapshot id, a Delta version),
each with the bounds of the first key column its metadata records (null: unknown). A file whose bounds hold a
changed key is read (its key columns first), and when rows of it have a changed key, its other rows are written
to ``<staging_uri>/_rewrites/<REWRITE_OF>=<i>/`` (``i``: its place in ``files``; no directory when none is left).
The report lists those files with their place and how many rows each loses; the commit swaps them for their
rewrites when the table is still at ``base``, and checks each rewrite holds the file's rows less those.

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

import bisect
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

JOB_FORMAT = 1
REPORT_FORMAT = 1
REPORT_NAME = "_kafka_batch_report.json"
ERRORS_DIR = "_errors"  # records the JSON decode step could not parse, with their offsets
# The day (UTC) of the record timestamp, as a date column the output is partitioned by when a
# table sink asks for it (job field "partition_by": "day").
DAY_COLUMN = "timestamp_date"
# The column (and directory name) of the table a record is routed to (job field "routing"), and what
# the errors output says of a record without a route.
TABLE_COLUMN = "_kafka_offsets_table"
NO_ROUTE = "no route: the record's topic has no table and its header names no allowed table"
# Merge mode (job field "merge": {"key": [column], "changes": "debezium" | "upsert"}): the app also writes
# the batch's change set, the last change per key, to <staging_uri>/_changes/: the row's columns, where the
# change came from, its op, and whether it deletes the key.
CHANGES_DIR = "_changes"
KAFKA_PARTITION = "_kafka_partition"
KAFKA_OFFSET = "_kafka_offset"
SOURCE_POSITION = "_source_position"  # Debezium's source.lsn (PostgreSQL) or source.file:pos (MySQL)
SOURCE_TS_MS = "_source_ts_ms"  # Debezium's source.ts_ms (else its ts_ms); upsert: the record timestamp
CHANGE_OP = "_op"  # c, u, r (Debezium's op of the row's last change), u / d for upserts and deletes
DELETED = "_deleted"
REWRITES_DIR = "_rewrites"
REWRITE_OF = "_kafka_offsets_rewrite_of"
DEBEZIUM_SOURCE = "STRUCT<lsn: BIGINT, ts_ms: BIGINT, file: STRING, pos: BIGINT>"


def debezium_envelope_ddl(row_ddl: str) -> str:
    """The Spark DDL a Debezium envelope's JSON decodes with, the row being ``row_ddl``: the envelope's
    fields at the top (JSON without schema) and again under ``payload`` (JSON with its embedded schema)."""
    row = f"STRUCT<{row_ddl}>"
    fields = f"before {row}, after {row}, op STRING, ts_ms BIGINT, source {DEBEZIUM_SOURCE}"
    return f"{fields}, payload STRUCT<{fields}>"


# Spark's Kafka connector jar: group 1 its Scala binary version, group 2 its Spark version.
CONNECTOR_JAR = re.compile(r"spark-sql-kafka-0-10_(2\.1[0-9])-([0-9][^/]*?)\.jar$")
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10"
# Spark 3.x is built for Scala 2.12 (2.13 builds exist but no managed platform runs them), 4.x for 2.13.
SCALA_BY_MAJOR = {"3": "2.12", "4": "2.13"}
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
# The job file's settings that hold secrets (S3 keys): spark.hadoop.* only, applied by the app.
PRIVATE_CONF = "private_conf"
HADOOP_PREFIX = "spark.hadoop."
# The job file's schema registry access (Avro decoding: URLs and credentials), private like the above.
REGISTRY_ACCESS = "schema_registry"
# Spark's Avro functions (from_avro), a module of its own beside the Kafka connector.
AVRO_ARTIFACT = "spark-avro"
AVRO_JAR = re.compile(r"spark-avro_(2\.1[0-9])-([0-9][^/]*?)\.jar$")


def keeps_raw_values(job: Mapping[str, Any]) -> bool:
    """False when the job's decoding writes ``value`` only for the records that do not decode
    (``"decode": {..., "keep_raw_value": false}``): the written values then do not give the key + value
    bytes read, which are counted from the read itself."""
    decode = job.get("decode")
    return not decode or decode.get("keep_raw_value", True) is not False


def spark_release(version: str) -> str:
    """``major.minor.patch`` of a Spark version string, without a vendor's suffix (``3.5.1-amzn-0``)."""
    found = _RELEASE.match(version.strip())
    if found is None:
        raise ValueError(f"{version!r} is not a Spark version (expected major.minor.patch, e.g. 4.0.1)")
    return found.group(0)


def spark_line(version: str) -> str:
    """The release line (``major.minor``) of a Spark version: what binary compatibility follows."""
    return spark_release(version).rsplit(".", 1)[0]


def scala_binary_version(spark_version: str) -> str:
    major = spark_release(spark_version).split(".")[0]
    if major not in SCALA_BY_MAJOR:
        raise ValueError(f"Spark {spark_version} is not a Spark 3 or 4 release")
    return SCALA_BY_MAJOR[major]


def connector_coordinates(spark_version: str, scala: str | None = None) -> str:
    """The Maven coordinates of the Kafka connector built for this Spark."""
    scala = scala or scala_binary_version(spark_version)
    return f"org.apache.spark:{CONNECTOR_ARTIFACT}_{scala}:{spark_release(spark_version)}"


def connector_mismatch(
    connector_version: str, connector_scala: str | None, spark_version: str, scala: str
) -> str | None:
    """Why a connector cannot run on this Spark, or None.

    The connector must come from the same release line and Scala binary version; its patch release may
    differ (Spark keeps binary compatibility within a line, and a line's newest patch is not always
    published together with its connector).
    """
    if spark_line(connector_version) == spark_line(spark_version) and connector_scala in (None, scala):
        return None
    built = f"{connector_version}" + (f" for Scala {connector_scala}" if connector_scala else "")
    return (
        f"Spark's Kafka connector is version {built} but the Spark that runs the batch is {spark_version} "
        f"(Scala {scala}): use {connector_coordinates(spark_version, scala)}"
    )


def pyspark_mismatch(pyspark_version: str, where: str, spark_version: str) -> str | None:
    """Why the pyspark the driver's Python imports (version ``pyspark_version``, found at ``where``) cannot
    drive this Spark, or None: its Python files must be of the Spark's own release. Checked before
    planning (from the path spark-submit will give the driver) and again on the driver."""
    if spark_release(pyspark_version) == spark_release(spark_version):
        return None
    return (
        f"the driver's Python imports pyspark {pyspark_version} ({where}) but the Spark that runs the batch is "
        f"{spark_version}: the Python files must be that Spark's own. spark-submit puts "
        "$SPARK_HOME/python/lib/pyspark.zip first on the driver's path; take out what comes before it (or, in a "
        "Spark home without it, the other pyspark on PYTHONPATH or in the driver's Python), and reinstall pyspark "
        "at Spark's version if pyspark-client was installed over it"
    )


class HadoopConfiguration(Protocol):
    """What the app uses of the JVM's ``org.apache.hadoop.conf.Configuration``."""

    def set(self, key: str, value: str) -> None: ...


def apply_private_conf(job: Mapping[str, Any], hadoop_conf: HadoopConfiguration) -> None:
    """Set the job's private ``spark.hadoop.*`` settings on the session's Hadoop configuration.

    Done at run time rather than with ``--conf`` so that the secrets stay off the command line;
    every later DataFrame read and write copies this configuration to its tasks.
    """
    for key, value in job.get(PRIVATE_CONF, {}).items():
        if not key.startswith(HADOOP_PREFIX):
            raise ValueError(f"private setting {key} is not {HADOOP_PREFIX}*")
        hadoop_conf.set(key[len(HADOOP_PREFIX) :], str(value))


def range_problems(ranges: Iterable[Mapping[str, Any]], partitions: Iterable[Mapping[str, Any]]) -> list[str]:
    """What is wrong with per-partition summaries against the requested ``[start, end)`` ranges.

    Offsets may have gaps (transaction markers, aborted records, compaction), so a partition
    may hold fewer records than its span; never an offset outside its range, never one twice,
    never a partition that was not requested.
    """
    planned = {(str(r["topic"]), int(r["partition"])): r for r in ranges}
    problems: list[str] = []
    for part in partitions:
        name = f"{part['topic']}-{part['partition']}"
        rng = planned.get((str(part["topic"]), int(part["partition"])))
        records = int(part["records"])
        if rng is None:
            problems.append(f"{name}: {records} records from a partition not in the plan")
            continue
        if int(part["distinct_offsets"]) != records:
            problems.append(f"{name}: {records} records but {part['distinct_offsets']} distinct offsets")
        start, end = int(rng["start"]), int(rng["end"])
        if records > end - start:
            problems.append(f"{name}: {records} records exceed the planned span {end - start}")
        low, high = part.get("min_offset"), part.get("max_offset")
        if records and (low is None or high is None or int(low) < start or int(high) >= end):
            problems.append(f"{name}: offsets [{low}, {high}] outside the planned range [{start}, {end})")
    return problems


def summarize_rows(rows: Iterable[tuple[str, int, int, int, bool]], decoding: bool = False) -> list[dict[str, Any]]:
    """A batch's per-partition summary from its ``(topic, partition, offset, key + value bytes, has a decode
    error)`` rows (the in-memory twin's runner): the same figures as the app's report."""
    summaries: dict[tuple[str, int], dict[str, Any]] = {}
    offsets: dict[tuple[str, int], set[int]] = {}
    for topic, partition, offset, payload_bytes, decode_error in rows:
        key = (topic, partition)
        part = summaries.get(key)
        if part is None:
            part = summaries[key] = {
                "topic": topic,
                "partition": partition,
                "records": 0,
                "min_offset": offset,
                "max_offset": offset,
                "payload_bytes": 0,
                **({"decode_errors": 0} if decoding else {}),
            }
            offsets[key] = set()
        part["records"] += 1
        part["min_offset"] = min(part["min_offset"], offset)
        part["max_offset"] = max(part["max_offset"], offset)
        part["payload_bytes"] += payload_bytes
        if decoding and decode_error:
            part["decode_errors"] += 1
        offsets[key].add(offset)
    for key, part in summaries.items():
        part["distinct_offsets"] = len(offsets[key])
    return [summaries[key] for key in sorted(summaries)]


def files_in_key_bounds(files: Sequence[Mapping[str, Any]], keys: Sequence[Any]) -> list[int]:
    """The places in ``files`` (each with ``lower`` / ``upper`` bounds of the first key column, null: unknown)
    of the files whose bounds hold one of ``keys`` (sorted, distinct, no null): the only files a change set of
    those keys can touch. A bound of another type than the keys' says nothing: the file is kept."""
    held = []
    for place, file in enumerate(files):
        lower, upper = file.get("lower"), file.get("upper")
        try:
            first = 0 if lower is None else bisect.bisect_left(keys, lower)
            if first < len(keys) and (upper is None or keys[first] <= upper):
                held.append(place)
        except TypeError:  # not comparable with the keys
            held.append(place)
    return held


def path_tail(path: str) -> str:
    """A file's path without its scheme, leading slashes and escapes: ``file:/d/f``, ``file:///d/f`` and
    ``/d/f`` are one path, as are ``s3a://b/k``, ``s3://b/k`` and ``s3://b/%6B``."""
    return urllib.parse.unquote(re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:", "", path)).lstrip("/")
