"""Batches on the Spark lines users run (3.5, 4.0 besides the worker's 4.2), from one worker install.

Each line's Spark is a pyspark of that version installed into its own Spark home
(``devstack.spark_lines``), put first on PATH as a cluster's client would be; the worker's venv
(pyspark 4.2) is unchanged. The package finds the Spark that runs the batch from the spark-submit
on PATH and gives it the connector built for it; the checks read the output with readers that
know nothing of the ledger (pyarrow, PyIceberg, delta-rs) and every produced id must be there
once. A connector or Connect client that does not fit the cluster's Spark is refused before
anything is planned, with the coordinates or pins to use.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from airflow_kafka_offsets.config import object_storage
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkVersionMismatchError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import s3a_spark_conf
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.versions import spark_home_spark, table_reader_package
from devstack import jars, spark_lines
from faults_harness import lake_readers

from .batch_proof import fail_then_retry_through_spark_submit
from .helpers import (
    assert_exactly_once,
    committed_rows,
    ledger_ranges,
    payload_per_partition,
    produce,
    range_bytes,
    refused,
)
from .pipeline import ACTOR, commit, commit_dies_at, plan, read, run_once, sink_of

# The lines the test command runs (the worker's own 4.2 runs in every other test); scripts/spark-matrix
# runs every line (AKO_SPARK_LINES=3.5,4.0,4.1,4.2) and writes the README's compatibility table.
LINES = os.environ.get("AKO_SPARK_LINES", "3.5,4.0").split(",")
JSON_SCHEMA = "id STRING, n INT"
FOREIGN_KEY = b"spark-writer"  # the key of the row Spark's own table writer appends
# The connector release each line's home gets by default (tests/integration/test_spark_published.py).
CENTRAL_CONNECTOR = {"3.5": "3.5.7", "4.0": "4.0.0", "4.1": "4.1.1", "4.2": "4.2.0"}


@pytest.fixture(scope="module", params=LINES)
def line_home(request: pytest.FixtureRequest, stack) -> tuple[str, Path, list[str]]:
    """(version, Spark home, connector jars) of one line, installed once per machine."""
    version = spark_lines.resolve(request.param)
    home = spark_lines.spark_home(version)
    return version, home, [str(j) for j in jars.fetch_connector(version)]


@pytest.fixture()
def on_path(line_home, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, list[str]]:
    """The line's spark-submit first on PATH, as on a worker that is the cluster's client."""
    _version, home, _ = line_home
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return line_home


def run_line_batch(stack, ledger: Ledger, spec, settings: SparkSettings):
    outcome = plan(ledger, spec, stack)
    assert outcome.plan is not None
    runner = settings_runner(settings)
    report = run_batch(
        ledger,
        sink_of(ledger, spec),
        outcome.plan,
        runner,
        {"bootstrap.servers": stack.bootstrap_servers},
        ACTOR,
    )
    commit_batch(ledger, sink_of(ledger, spec), spec.name, outcome.plan.batch_id, ACTOR)
    return outcome.plan, report


# Every sink on every line is scripts/spark-matrix's run (AKO_SPARK_LINES set). The test command runs, on
# each of its lines, the table sink that line's crashed-commit readers' test below does not give it (Spark
# writes plain Parquet for every sink; the directory sink runs on each line in the large batch's test): each
# combination is a cold spark-submit of another Spark.
LINE_SINK = {"3.5": "iceberg", "4.0": "delta"}
SINKS = ["directory", "iceberg", "delta"] if "AKO_SPARK_LINES" in os.environ else ["table"]


@pytest.mark.integration
@pytest.mark.parametrize("sink_format", SINKS)
def test_a_batch_runs_on_the_clusters_spark_line_in_every_sink(
    stack, ledger, make_topic, tmp_path, on_path, sink_format
):
    version, _, connector = on_path
    if sink_format == "table":
        sink_format = LINE_SINK[".".join(version.split(".")[:2])]
    topic = make_topic(partitions=2)
    name = f"line_{version.replace('.', '_')}_{sink_format}"
    table = f"lake.{name}" if sink_format == "iceberg" else name
    sink = None if sink_format == "directory" else {"format": sink_format, "table": table}
    spec = build_spec(name, [topic], str(tmp_path / "out"), json_schema=JSON_SCHEMA, sink=sink)
    produced = produce(stack.bootstrap_servers, topic, 200, 2)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    producer.produce(topic, key=b"not-utf8", value=b'{"id": "\xff\xfe"}', partition=0)
    assert producer.flush(30) == 0

    batch, report = run_line_batch(stack, ledger, spec, SparkSettings(jars=tuple(connector)))

    assert report.spark_version == version  # the batch ran on the line's Spark, not the worker's 4.2
    ranges = [(b, state, t, p, start, end) for b, state, t, p, _, start, end, _ in ledger_ranges(ledger, name)]
    assert ranges == [(batch.batch_id, "committed", topic, 0, 0, 101), (batch.batch_id, "committed", topic, 1, 0, 100)]
    if sink_format == "directory":
        rows = committed_rows(ledger, name)
    else:
        rows = lake_readers.read_table(stack.pg_url(), ledger.schema, spec).to_pylist()
    bad = [r for r in rows if r["key"] == b"not-utf8"]
    assert [(r["offset"], r["decode_error"], r["decoded"]) for r in bad] == [(100, "value is not valid UTF-8", None)]
    rows = [r for r in rows if r["key"] != b"not-utf8"]
    assert_exactly_once(rows, produced)
    # the JSON decode step ran on this line too (is_valid_utf8 is Spark 4's; 3.5 checks otherwise)
    assert all(r["decode_error"] is None and r["decoded"] == json.loads(r["value"]) for r in rows)


@pytest.mark.integration
def test_a_batch_proves_its_files_and_counts_its_bytes_while_writing_on_the_clusters_spark_line(
    stack, ledger, make_topic, tmp_path, monkeypatch, on_path
):
    """The app proves its files from their footers (read by this line's parquet-java) against its read's counts
    per range, observed as the write runs with the key + value bytes (a classic session's Observation on this
    line's Spark): an attempt whose files were tampered with fails naming each problem, and the retry commits
    every record once, its bytes per partition exact."""
    version, _, connector = on_path
    name = f"line_bytes_{version.replace('.', '_')}"
    ran, produced = fail_then_retry_through_spark_submit(
        stack, ledger, make_topic, tmp_path, monkeypatch, name, connector, records=51_000
    )
    assert ran == version
    expected = payload_per_partition(produced, 3)
    assert range_bytes(ledger, name) == [(p, 17_000, expected[p]) for p in range(3)]


@pytest.mark.integration
def test_a_connector_built_for_another_spark_is_refused_before_anything_is_planned(
    stack, ledger, make_topic, tmp_path, on_path
):
    version, _, _ = on_path
    other = spark_lines.resolve("4.0" if version.startswith("4.2") else "4.2")
    other_scala = "2.12" if other.startswith("3.") else "2.13"
    foreign = [str(j) for j in jars.fetch_connector(other)]
    scala = "2.12" if version.startswith("3.") else "2.13"
    runner = settings_runner(SparkSettings(jars=tuple(foreign)))
    with refused(
        SparkVersionMismatchError,
        rf"connector is version {re.escape(other)} for Scala {other_scala} but the Spark that runs the batch is "
        rf"{re.escape(version)} \(Scala {scala}\): use org\.apache\.spark:spark-sql-kafka-0-10_{scala}:"
        rf"{re.escape(version)} \(Spark home ",
    ):
        runner.check()
    # without jars or packages, the default is the connector built for the line, at the nearest release
    # Maven Central serves with its token provider (4.0.3's is not there)
    assert settings_runner(SparkSettings()).check().packages == (
        f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{CENTRAL_CONNECTOR[spark_lines.line_of(version)]}",
    )


SPARK_TABLE_READER = """
import json, os, sys, time
from pyspark.sql import SparkSession
from pyspark.sql.functions import lit
with open(sys.argv[1]) as handle:
    job = json.load(handle)
spark = SparkSession.builder.master("local[1]").appName("table-reader").getOrCreate()
def table():
    return spark.table(job["table"]) if job["table"] else spark.read.format("delta").load(job["location"])
if job["foreign_key"]:  # a foreign writer: Spark appends a row of its own with its own table writer
    row = table().limit(1).withColumn("key", lit(job["foreign_key"].encode())).withColumn("topic", lit("elsewhere"))
    if job["table"]:
        row.writeTo(job["table"]).append()
    else:
        row.write.format("delta").mode("append").save(job["location"])
    print("appended", flush=True)
    deadline = time.time() + 600  # a test that failed meanwhile never says so
    while not os.path.exists(job["go"]):  # read once the test says the batch is committed (the
        if time.time() > deadline:  # application's stdin is spark-submit's JVM's, not the test's)
            sys.exit("never told to read")
        time.sleep(0.2)
if job["table"]:
    spark.catalog.refreshTable(job["table"])  # the catalog cached the table as Spark's append left it
for row in table().select("key", "partition", "offset").collect():
    print(json.dumps({"key": row.key.hex(), "partition": row.partition, "offset": row.offset}))
spark.stop()
"""


def spark_table_session(
    stack, ledger: Ledger, spec, home: Path, tmp_path: Path, foreign_key: bytes
) -> subprocess.Popen:
    """A spark-submit of the line's Spark with its own table runtime (iceberg-spark-runtime through the
    JDBC catalog in the ledger's database, or through the stack's REST catalog with S3FileIO;
    delta-spark) that appends a row keyed ``foreign_key`` to the table, prints ``appended``, and reads
    the whole table once told to (``spark_table_rows``)."""
    spark = spark_home_spark(home)
    assert spark is not None
    package = table_reader_package(spec.sink.format.value, spark.version)
    ivy = str(Path.home() / ".cache" / "airflow-kafka-offsets" / "ivy")
    conf = {"spark.jars.ivy": ivy, "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"}
    if spec.sink.catalog_conn_id:  # the stack's REST catalog, with its OAuth2 client; tables on its S3
        iceberg = package.rsplit(":", 1)[1]
        conf |= {
            "spark.jars.packages": f"{package},org.apache.iceberg:iceberg-aws-bundle:{iceberg}",
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.lake.type": "rest",
            "spark.sql.catalog.lake.uri": stack.iceberg_rest_uri,
            "spark.sql.catalog.lake.credential": f"{stack.iceberg_rest_client_id}:{stack.iceberg_rest_client_secret}",
            "spark.sql.catalog.lake.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
            "spark.sql.catalog.lake.s3.endpoint": stack.s3_endpoint,
            "spark.sql.catalog.lake.s3.path-style-access": "true",
            "spark.sql.catalog.lake.s3.access-key-id": stack.s3_access_key,
            "spark.sql.catalog.lake.s3.secret-access-key": stack.s3_secret_key,
            "spark.sql.catalog.lake.client.region": stack.s3_region,
        }
        job = {"conf": conf, "table": f"lake.{spec.sink.table}", "location": None}
    elif spec.sink.format.value == "iceberg":
        catalog = ledger.schema  # the catalog's name in iceberg_tables: the ledger's schema
        conf |= {
            "spark.jars.packages": f"{package},org.postgresql:postgresql:42.7.4",
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            f"spark.sql.catalog.{catalog}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{catalog}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            f"spark.sql.catalog.{catalog}.uri": f"jdbc:postgresql://{stack.pg_host}:{stack.pg_port}/{stack.pg_database}",
            f"spark.sql.catalog.{catalog}.jdbc.user": stack.pg_user,
            f"spark.sql.catalog.{catalog}.jdbc.password": stack.pg_password,
            f"spark.sql.catalog.{catalog}.warehouse": spec.output_root,
        }
        job = {"conf": conf, "table": f"{catalog}.{spec.sink.table}", "location": None}
    else:
        conf |= {
            "spark.jars.packages": package,
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        }
        location = lake_readers.delta_table(spec).table_uri
        job = {"conf": conf, "table": None, "location": location}
    properties = tmp_path / "reader.properties"  # holds the catalog's password: a private file, not argv
    properties.touch(mode=0o600)
    properties.write_text("".join(f"{key} {value}\n" for key, value in job.pop("conf").items()))
    job_file = tmp_path / "reader-job.json"
    job_file.write_text(json.dumps(job | {"foreign_key": foreign_key.decode(), "go": str(tmp_path / "go")}))
    script = tmp_path / "reader.py"
    script.write_text(SPARK_TABLE_READER)
    with open(tmp_path / "reader.err", "w") as err:  # the child keeps its own descriptor
        session = subprocess.Popen(
            [str(home / "bin" / "spark-submit"), "--properties-file", str(properties), str(script), str(job_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=spark_lines.submit_env(home),
        )
    assert session.stdout is not None
    said = [session.stdout.readline()]  # spark-submit's own lines (ivy's) come first
    while said[-1] not in ("appended\n", ""):
        said.append(session.stdout.readline())
    assert said[-1] == "appended\n", f"{said!r}: {(tmp_path / 'reader.err').read_text()[-4000:]}"
    return session


def spark_table_rows(session: subprocess.Popen, tmp_path: Path) -> list[dict]:
    """What the session reads of the whole table, once told to."""
    (tmp_path / "go").touch()
    out, _ = session.communicate(timeout=600)
    assert session.returncode == 0, (tmp_path / "reader.err").read_text()[-4000:]
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [{**r, "key": bytes.fromhex(r["key"])} for r in rows]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("sink_format", "line"),
    [pytest.param("iceberg", "4.0", marks=pytest.mark.long), ("iceberg-rest", "4.0"), ("delta", "3.5")],
)
def test_sparks_own_table_readers_see_every_id_once_after_crashed_commits(
    stack, ledger, make_topic, tmp_path, sink_format, line, batches_on_spark_connect
):
    """Spark's table runtimes (iceberg-spark-runtime through the JDBC catalog or the REST catalog,
    delta-spark) read what the sinks committed, after a worker died between publishing and the
    ledger's commit and after one died inside the commit transaction; the same Spark appended a row
    of its own while the last batch was in flight, which that batch's commit goes on top of (the
    batches on the warm Spark Connect server: Spark's writers and readers are the subject)."""
    home = spark_lines.spark_home(spark_lines.resolve(line))
    topic = make_topic(partitions=2)
    name = f"spark_reads_{sink_format.replace('-', '_')}_{line.replace('.', '_')}"
    if sink_format == "iceberg-rest":
        namespace = f"rest_{uuid.uuid4().hex[:8]}"
        sink = {"format": "iceberg", "table": f"{namespace}.{name}", "catalog_conn_id": "iceberg_rest_default"}
        output_root = f"s3://{stack.s3_bucket}/{namespace}"
    else:
        table = f"lake.{name}" if sink_format == "iceberg" else name
        sink, output_root = {"format": sink_format, "table": table}, str(tmp_path / "lake")
    spec = build_spec(name, [topic], output_root, sink=sink)
    produced = produce(stack.bootstrap_servers, topic, 150, 2)
    assert run_once(ledger, spec, stack) is not None
    session = None
    for point in ("after_publish", "in_commit_transaction"):
        produced += produce(stack.bootstrap_servers, topic, 100, 2)
        outcome = plan(ledger, spec, stack)
        read(ledger, spec, stack, outcome)
        if point == "in_commit_transaction":  # Spark commits a row of its own to the table first
            session = spark_table_session(stack, ledger, spec, home, tmp_path, FOREIGN_KEY)
        commit_dies_at(ledger, spec, outcome.plan.batch_id, point)
        commit(ledger, spec, outcome.plan.batch_id)  # the retry commits the same batch once

    assert session is not None
    rows = spark_table_rows(session, tmp_path)
    assert len(rows) == 351
    assert [r["key"] for r in rows].count(FOREIGN_KEY) == 1
    assert_exactly_once([r for r in rows if r["key"] != FOREIGN_KEY], produced)


@pytest.mark.integration
def test_a_directory_batch_on_s3_runs_on_spark_4_0_with_its_own_s3a(stack, ledger, make_topic, monkeypatch):
    """S3A at the Hadoop of the line's Spark (4.0: Hadoop 3.4.1), keys in the private job file; the
    batch is published by its manifest and read back through it."""
    from .test_object_store import s3fs

    version = spark_lines.resolve("4.0")
    home = spark_lines.spark_home(version)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    connector = [str(j) for j in jars.fetch_connector(version)]
    s3a = [str(j) for j in jars.fetch_s3a(spark_home=home)]
    topic = make_topic(partitions=2)
    base = f"{stack.s3_bucket}/{uuid.uuid4().hex}"
    spec = build_spec("line_s3", [topic], f"s3://{base}/out")
    produced = produce(stack.bootstrap_servers, topic, 120, 2)
    storage = object_storage(spec.output_root)
    settings = SparkSettings(jars=(*connector, *s3a), private_conf=s3a_spark_conf(storage), storage=storage)

    batch, report = run_line_batch(stack, ledger, spec, settings)

    assert report.spark_version == version
    # a reader without this package: the batch's _manifest under the output root, and the files it lists
    manifests, rows = lake_readers.manifest_listing(s3fs(stack), f"{base}/out/line_s3")
    assert manifests == [f"{base}/out/line_s3/batch={batch.batch_id:012d}/_manifest"]
    assert_exactly_once(rows, produced)
