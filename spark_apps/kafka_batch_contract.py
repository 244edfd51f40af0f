"""The contract between airflow-kafka-offsets and its Spark app: formats, names and the range check.

Plain Python with no imports beyond the standard library, so that the app (which runs where
Airflow is not installed) and the package (``airflow_kafka_offsets.spark_apps.kafka_batch_contract``)
share one copy. spark-submit ships this file next to the app with ``--py-files``.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
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
    """The read-back summary of a small batch from its collected ``(topic, partition, offset,
    key + value bytes, has a decode error)`` rows: the same figures as the app's Spark aggregate."""
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


# Avro values in the Confluent wire format: magic byte 0, the writer schema's id (4 bytes, big-endian),
# then the Avro binary encoding. Why a record does not decode, as its decode_error says (the app builds
# the same texts in Spark; wire_header is the same check in Python).
MAGIC_BYTE = 0
WIRE_HEADER_BYTES = 5
EMPTY_VALUE = "value is empty: no Confluent wire format header"
UNKNOWN_MAGIC = ("unknown magic byte 0x", " (the Confluent wire format starts with 0x00)")
SHORT_HEADER = "value is shorter than the 5-byte header of the Confluent wire format"
UNKNOWN_SCHEMA_ID = ("unknown schema id ", " (the schema registry does not have it)")
UNDECODABLE = ("payload does not decode with writer schema id ", " into the reader schema")
# The field the app adds to the reader schema (a boolean with default true): from_avro's PERMISSIVE mode
# gives a struct of nulls both for a record it could not decode and one whose fields are all null; the
# marker is true only for a record that decoded.
DECODED_MARKER = "__kafka_offsets_decoded"
REGISTRY_TIMEOUT_S = 30.0


def wire_header(value: bytes | None) -> tuple[int | None, str | None]:
    """The writer schema id of a value in the Confluent wire format, or why it is not in it.

    ``(None, None)`` for a tombstone (no value: nothing to decode, not an error)."""
    if value is None:
        return None, None
    if not value:
        return None, EMPTY_VALUE
    if value[0] != MAGIC_BYTE:
        return None, f"{UNKNOWN_MAGIC[0]}{value[0]:02x}{UNKNOWN_MAGIC[1]}"
    if len(value) < WIRE_HEADER_BYTES:
        return None, SHORT_HEADER
    return int.from_bytes(value[1:WIRE_HEADER_BYTES], "big"), None


def not_avro(schema_id: int, schema_type: str) -> str:
    return f"schema id {schema_id} is a {schema_type} schema, not Avro"


def marked_reader_schema(schema: str) -> tuple[str, str]:
    """The reader schema with the decoded marker added as its last field, and the marker's name
    (:data:`DECODED_MARKER`, suffixed if the schema has a field of that name)."""
    parsed = json.loads(schema)
    names = {str(f.get("name")) for f in parsed.get("fields", [])}
    marker = DECODED_MARKER
    while marker in names:
        marker += "_"
    field = {"name": marker, "type": "boolean", "default": True}
    return json.dumps({**parsed, "fields": [*parsed["fields"], field]}), marker


def parse_schema_answer(body: bytes) -> tuple[str, str]:
    """(schema type, schema text) of the registry's answer to ``GET /schemas/ids/<id>``; the type is
    ``AVRO`` when the registry leaves it out (Confluent's and Apicurio's answers for Avro do)."""
    data = json.loads(body.decode("utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("schema"), str):
        raise ValueError("the schema registry's answer has no schema")
    return str(data.get("schemaType") or "AVRO").upper(), data["schema"]


Fetch = Callable[[urllib.request.Request, float, "ssl.SSLContext | None"], bytes]


def _urlopen(request: urllib.request.Request, timeout: float, context: ssl.SSLContext | None) -> bytes:
    with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:  # http(s): the connection's URLs
        body: bytes = answer.read()
        return body


def registry_headers(access: Mapping[str, Any]) -> dict[str, str]:
    """The registry request's headers: basic auth or a bearer token (secrets: never log them)."""
    headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
    if access.get("basic_auth"):
        headers["Authorization"] = "Basic " + base64.b64encode(str(access["basic_auth"]).encode()).decode()
    elif access.get("bearer_token"):
        headers["Authorization"] = f"Bearer {access['bearer_token']}"
        if access.get("logical_cluster"):
            headers["target-sr-cluster"] = str(access["logical_cluster"])
        if access.get("identity_pool_id"):
            headers["Confluent-Identity-Pool-Id"] = str(access["identity_pool_id"])
    return headers


def fetch_writer_schemas(
    access: Mapping[str, Any], schema_ids: Iterable[int], fetch: Fetch = _urlopen
) -> tuple[dict[int, str], dict[int, str], set[int]]:
    """Each schema id from the registry once: (Avro schemas by id, other schema types by id, unknown ids).

    An id the registry does not have is the records' problem (their decode_error says so); a registry
    that does not answer, refuses the credentials or fails is the batch's (raised: a retry may succeed).
    The registry's URLs are tried in order until one answers.
    """
    urls = [str(u).rstrip("/") for u in access.get("urls") or []]
    if not urls:
        raise ValueError("the job's schema registry access names no URL")
    cafile = access.get("ssl_ca_location")
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    headers = registry_headers(access)
    avro: dict[int, str] = {}
    other: dict[int, str] = {}
    unknown: set[int] = set()
    for schema_id in sorted(set(int(i) for i in schema_ids)):
        body = None
        failures = []
        for url in urls:
            request = urllib.request.Request(f"{url}/schemas/ids/{schema_id}", headers=headers)
            try:
                body = fetch(request, REGISTRY_TIMEOUT_S, context if url.startswith("https:") else None)
                break
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    unknown.add(schema_id)
                    break
                if exc.code in (401, 403):
                    raise PermissionError(
                        f"the schema registry at {url} refused the credentials (HTTP {exc.code}) asking for writer "
                        f"schema id {schema_id}: check the schema registry connection"
                    ) from None
                failures.append(f"{url}: HTTP {exc.code}")
            except (urllib.error.URLError, OSError) as exc:
                failures.append(f"{url}: {getattr(exc, 'reason', exc)}")
        if body is None:
            if schema_id in unknown:
                continue
            raise ConnectionError(
                f"the schema registry did not answer for writer schema id {schema_id} ({'; '.join(failures)})"
            )
        kind, schema = parse_schema_answer(body)
        (avro if kind == "AVRO" else other)[schema_id] = schema if kind == "AVRO" else kind
    return avro, other, unknown
