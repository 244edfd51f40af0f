"""Iceberg and Delta sinks on the real stack: Spark writes, the ledger commits, readers we did not write read.

Readers: PyIceberg's SqlCatalog (the catalog rows in the ledger's database) for Iceberg, delta-rs
for Delta. Each test checks every produced id exactly once, at its exact partition and offset,
and the table's commit history (pipeline, batch, attempt) against the ledger.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg2
import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from airflow_kafka_offsets.core.model import BatchState, PipelineSpec
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import InvalidPipelineSpecError, OutputTableChangedError, SchemaEvolutionError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.runtime import object_storage
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.replay import replay_batch
from airflow_kafka_offsets.service.operations.sweep import sweep
from airflow_kafka_offsets.sinks.schema import RECORD_SCHEMA
from airflow_kafka_offsets.spark.versions import table_reader_package
from faults_harness import lake_readers

from .helpers import assert_exactly_once, produce, refused
from .pipeline import ACTOR, commit, commit_dies_at, operation_context, plan, read, run_once, sink_of, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

FORMATS = ["iceberg", "delta"]


def table_spec(
    name: str, topic: str, root: str, sink_format: str, partition_by: str | None = None, **options: Any
) -> PipelineSpec:
    table = f"lake.{name}" if sink_format == "iceberg" else name
    sink = {"format": sink_format, "table": table, "partition_by": partition_by}
    return build_spec(name, [topic], root, sink=sink, **options)


def read_table(stack, ledger: Ledger, spec: PipelineSpec) -> pa.Table:
    """The table as an engine without the ledger reads it (the Iceberg catalog is named after the ledger's schema)."""
    return lake_readers.read_table(stack.pg_url(), ledger.schema, spec)


def table_commits(stack, ledger: Ledger, spec: PipelineSpec) -> list[dict[str, str]]:
    """(operation, batch, attempt) of the pipeline's commits in the table's history, oldest first."""
    return lake_readers.table_commits(stack.pg_url(), ledger.schema, spec)


SPARK_DELTA_READER = """
import json, sys
from pyspark.sql import SparkSession
location, package, ivy = sys.argv[1:4]
spark = (
    SparkSession.builder.master("local[1]").appName("delta-reader")
    .config("spark.jars.packages", package).config("spark.jars.ivy", ivy)
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
for row in spark.read.format("delta").load(location).select("key", "partition", "offset").collect():
    print(json.dumps({"key": row.key.hex(), "partition": row.partition, "offset": row.offset}))
spark.stop()
"""


def spark_delta_rows(spec: PipelineSpec) -> list[dict]:
    """The Delta table as Spark's own Delta reader sees it (delta-spark for the installed Spark line).

    In a process of its own: a JVM that an earlier test started in this one keeps its classpath.
    """
    import pyspark

    location = files.join(files.location_uri(spec.output_root), spec.sink.table)
    ivy = str(Path.home() / ".cache" / "airflow-kafka-offsets" / "ivy")
    package = table_reader_package("delta", pyspark.__version__)
    result = subprocess.run(
        [sys.executable, "-c", SPARK_DELTA_READER, location, package, ivy], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [{**r, "key": bytes.fromhex(r["key"])} for r in rows]


def rows_of(table: pa.Table) -> list[dict]:
    return table.select(["key", "partition", "offset"]).to_pylist()


def committed_attempt(ledger: Ledger, pipeline: str, batch_id: int) -> str:
    with ledger.transaction() as tx:
        attempt = tx.latest_succeeded_attempt(pipeline, batch_id)
    assert attempt is not None
    return attempt.attempt_id


@pytest.mark.parametrize("sink_format", FORMATS)
def test_batches_land_once_replay_rewrites_in_place_abort_takes_back_sweep_keeps_the_table(
    stack, ledger, make_topic, tmp_path, sink_format
):
    topic = make_topic(partitions=2)
    spec = table_spec(f"tbl_{sink_format}", topic, str(tmp_path / "lake"), sink_format)
    first = produce(stack.bootstrap_servers, topic, 300, 2)
    assert run_once(ledger, spec, stack).records == 300
    second = produce(stack.bootstrap_servers, topic, 200, 2)
    assert run_once(ledger, spec, stack).records == 200
    assert run_once(ledger, spec, stack) is None  # nothing new: no batch, no table commit

    table = read_table(stack, ledger, spec)
    assert table.num_rows == 500
    assert table.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert_exactly_once(rows_of(table), first + second)
    assert table_commits(stack, ledger, spec) == [
        {
            "kafka-offsets.operation": "commit",
            "kafka-offsets.batch": str(b),
            "kafka-offsets.attempt": committed_attempt(ledger, spec.name, b),
        }
        for b in (1, 2)
    ]
    assert sink_of(ledger, spec).describe()["format"] == sink_format
    if sink_format == "delta":
        assert_exactly_once(spark_delta_rows(spec), first + second)

    # replay: the batch's rows are rewritten in one table commit, the same records
    ctx = operation_context(ledger, stack, submitter(stack))
    replay_batch(ctx, spec.name, 1)
    assert_exactly_once(rows_of(read_table(stack, ledger, spec)), first + second)
    operations = [(c["kafka-offsets.operation"], c["kafka-offsets.batch"]) for c in table_commits(stack, ledger, spec)]
    assert operations == [("commit", "1"), ("commit", "2"), ("replay", "1")]
    with refused(InvalidPipelineSpecError, "replay_output_root applies to the directory sink only"):
        replay_batch(ctx, spec.name, 1, str(tmp_path))

    # abort: a batch read (and, for Delta, committed to the table by a worker that died before the
    # ledger's commit) leaves the table as it was
    produce(stack.bootstrap_servers, topic, 40, 2)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    if sink_format == "delta":
        commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
        assert read_table(stack, ledger, spec).num_rows == 540
    abort_planned_batch(ctx, spec.name, "test")
    assert_exactly_once(rows_of(read_table(stack, ledger, spec)), first + second)

    # batch 1's first attempt is no longer in the current snapshot but still in the table's history:
    # the sweep keeps it, like every file the table references (expiry/VACUUM are the table's own)
    sink = sink_of(ledger, spec)
    on_disk = sink.staged_attempts(spec.name)
    assert sorted(on_disk) == ([1, 2, 3] if sink_format == "delta" else [1, 2])
    assert len(on_disk[1]) == 2
    swept = sweep(ledger, sink, spec.name, dry_run=False, actor=ACTOR)
    assert swept.items == ()
    assert sink.staged_attempts(spec.name) == on_disk
    assert_exactly_once(rows_of(read_table(stack, ledger, spec)), first + second)


def produce_on_days(bootstrap: str, topic: str, days: list[str], per_day: int) -> list[dict]:
    """Records whose Kafka timestamps fall on the given UTC days (a producer may set CreateTime)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    acked: list[dict] = []

    def on_delivery(err, msg):
        assert err is None, err
        acked.append({"id": msg.key().decode(), "partition": msg.partition(), "offset": msg.offset()})

    for day in days:
        midnight = datetime.fromisoformat(f"{day}T00:00:00+00:00")
        for i in range(per_day):
            rid = f"{day}-{uuid.uuid4().hex}"
            at_ms = int((midnight + timedelta(minutes=10 * i)).timestamp() * 1000)
            producer.produce(
                topic, key=rid.encode(), value=rid.encode(), partition=i % 2, timestamp=at_ms, on_delivery=on_delivery
            )
    assert producer.flush(30) == 0
    return acked


def partitions_of(stack, ledger: Ledger, spec: PipelineSpec) -> dict[str, int]:
    """Records per table partition, as the table's own metadata lists its data files."""
    counts: dict[str, int] = {}
    storage = files.Storage(object_storage(spec.output_root))
    if spec.sink.format.value == "iceberg":
        table = SqlCatalog(ledger.schema, uri=stack.pg_url(), **storage.pyiceberg_properties()).load_table(
            spec.sink.table
        )
        for task in table.scan().plan_files():
            day = (date(1970, 1, 1) + timedelta(days=task.file.partition[0])).isoformat()
            counts[day] = counts.get(day, 0) + task.file.record_count
        return counts
    location = files.join(files.location_uri(spec.output_root), spec.sink.table)
    actions = DeltaTable(location, storage_options=storage.delta_storage_options()).get_add_actions(flatten=True)
    for day, records in zip(
        actions.column("partition.timestamp_date").to_pylist(), actions.column("num_records").to_pylist(), strict=True
    ):
        counts[str(day)] = counts.get(str(day), 0) + records
    return counts


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("sink_format", FORMATS)
def test_a_crash_inside_the_commit_then_the_retry_commits_once_into_day_partitions(
    stack, ledger, make_topic, tmp_path, sink_format, where
):
    topic = make_topic(partitions=2)
    root = str(tmp_path / "lake") if where == "local" else f"s3://{stack.s3_bucket}/{uuid.uuid4().hex}/lake"
    spec = table_spec(f"crash_{sink_format}", topic, root, sink_format, partition_by="day")
    # the two days before today: the broker's retention (7 days) would delete records of fixed dates
    days = [(datetime.now(UTC).date() - timedelta(days=back)).isoformat() for back in (2, 1)]
    produced = produce_on_days(stack.bootstrap_servers, topic, days, 60)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)

    for point in ("in_commit_transaction", "after_publish"):
        commit_dies_at(ledger, spec, outcome.plan.batch_id, point)
        assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
        # Iceberg's pointer moves in the ledger's transaction: nothing. Delta commits just before the
        # ledger: the batch is in the table, and the retry must not add it again.
        assert read_table(stack, ledger, spec).num_rows == (0 if sink_format == "iceberg" else 120)

    done = commit(ledger, spec, outcome.plan.batch_id)
    assert done.committed_now and done.records == 120
    assert_exactly_once(rows_of(read_table(stack, ledger, spec)), produced)
    assert [c["kafka-offsets.batch"] for c in table_commits(stack, ledger, spec)] == ["1"]
    assert partitions_of(stack, ledger, spec) == {days[0]: 60, days[1]: 60}


def test_an_additive_json_schema_change_evolves_the_table_and_anything_else_is_refused(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1)
    root = str(tmp_path / "lake")
    for sink_format in FORMATS:
        spec = table_spec(f"evolve_{sink_format}", topic, root, sink_format, json_schema="id STRING")
        sink_of(ledger, spec).check_writable(spec.decode)
        wider = table_spec(f"evolve_{sink_format}", topic, root, sink_format, json_schema="id STRING, n BIGINT")
        sink_of(ledger, wider).check_writable(wider.decode)
        decoded = read_table(stack, ledger, wider).schema.field("decoded").type
        assert [f.name for f in decoded] == ["id", "n"]
        narrower = table_spec(f"evolve_{sink_format}", topic, root, sink_format, json_schema="id BIGINT")
        with refused(SchemaEvolutionError, "only adding"):
            sink_of(ledger, narrower).check_writable(narrower.decode)


def test_an_iceberg_table_dropped_or_replaced_by_someone_else_is_refused_at_plan_and_nothing_changes(
    stack, ledger, make_topic, tmp_path
):
    """The ledger's own SQL catalog (test_iceberg_rest.py has the REST catalog's): after a committed batch,
    another client drops the pipeline's table, then creates another of the same name; with a sink of two
    tables, drops one. Each next plan is refused naming the table, the batch and what changed; the ledger
    keeps its batch and the catalog gets nothing."""
    topics = [make_topic(partitions=1) for _ in range(2)]
    root = str(tmp_path / "lake")
    one = table_spec("dropped", topics[0], root, "iceberg")
    many = build_spec(
        "dropped_many",
        topics,
        root,
        sink={"format": "iceberg", "tables": {t: f"lake.d{i}" for i, t in enumerate(topics)}},
    )
    for topic in topics:
        produce(stack.bootstrap_servers, topic, 10, 1)
    assert [run_once(ledger, spec, stack).records for spec in (one, many)] == [10, 20]
    for topic in topics:
        produce(stack.bootstrap_servers, topic, 10, 1)
    catalog = SqlCatalog(ledger.schema, uri=stack.pg_url())

    def refused_plan(spec: PipelineSpec, match: str) -> None:
        with refused(OutputTableChangedError, match):
            plan(ledger, spec, stack)
        with ledger.transaction() as tx:
            assert [(b.batch_id, b.state) for b in tx.recent_batches(spec.name, 10)] == [(1, "committed")]

    catalog.drop_table("lake.dropped")
    refused_plan(one, rf"^Iceberg table lake.dropped \(catalog '{ledger.schema}'\) was dropped since batch 1 committed")
    assert not catalog.table_exists("lake.dropped")
    replacement = catalog.create_table("lake.dropped", RECORD_SCHEMA, location=str(tmp_path / "other"))
    refused_plan(
        one, f"lake.dropped .* was replaced by another table of the same name .*{replacement.metadata.table_uuid}"
    )
    assert catalog.load_table("lake.dropped").snapshots() == []

    catalog.drop_table("lake.d1")
    refused_plan(many, "^Iceberg table lake.d1 .* was dropped since batch 1 committed to it: .* Nothing was planned")
    assert not catalog.table_exists("lake.d1")


def test_an_iceberg_catalog_in_another_database_commits_idempotently_beside_another_writer(
    stack, ledger, make_topic, tmp_path, monkeypatch
):
    database = f"catalog_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(stack.pg_dsn())
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{database}"')
    admin.close()
    connection = {
        "conn_type": "postgres",
        "host": stack.pg_host,
        "port": stack.pg_port,
        "login": stack.pg_user,
        "password": stack.pg_password,
        "schema": database,
    }
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_ELSEWHERE", json.dumps(connection))
    topic = make_topic(partitions=2)
    sink = {"format": "iceberg", "table": "lake.ext", "catalog_conn_id": "iceberg_elsewhere"}
    spec = build_spec("ext", [topic], str(tmp_path / "lake"), sink=sink)
    produced = produce(stack.bootstrap_servers, topic, 80, 2)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)

    # another writer appends its own rows to the same table while the batch is in flight
    catalog = SqlCatalog(ledger.schema, uri=stack.pg_url(database))
    assert not SqlCatalog(ledger.schema, uri=stack.pg_url()).table_exists("lake.ext")  # not in the ledger's db
    foreign = {"key": b"other-writer", "value": b"x", "topic": "elsewhere", "partition": 0, "offset": 0}
    catalog.load_table("lake.ext").append(pa.Table.from_pylist([foreign], schema=RECORD_SCHEMA))

    def table_rows() -> list[dict]:
        return rows_of(catalog.load_table("lake.ext").scan().to_arrow())

    def ours(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r["key"] != b"other-writer"]

    # the table commit lands, then the worker dies before the ledger's commit
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
    assert len(table_rows()) == 81
    done = commit(ledger, spec, outcome.plan.batch_id)  # finds its snapshot: adds nothing again
    assert done.committed_now and done.records == 80
    rows = table_rows()
    assert_exactly_once(ours(rows), produced)
    assert len(rows) == 81

    # a batch a crash left in the table is taken back out by an abort
    produce(stack.bootstrap_servers, topic, 20, 2)
    second = plan(ledger, spec, stack)
    read(ledger, spec, stack, second)
    commit_dies_at(ledger, spec, second.plan.batch_id, "after_publish")
    assert len(table_rows()) == 101
    abort_planned_batch(operation_context(ledger, stack), spec.name, "test")
    rows = table_rows()
    assert_exactly_once(ours(rows), produced)
    assert len(rows) == 81
    operations = [
        (s.summary["kafka-offsets.operation"], s.summary["kafka-offsets.batch"])
        for s in catalog.load_table("lake.ext").snapshots()
        if s.summary is not None and s.summary["kafka-offsets.batch"] is not None
    ]
    assert operations == [("commit", "1"), ("commit", "2"), ("abort", "2")]
