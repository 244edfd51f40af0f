"""What the documentation says about tables, files and ledger rows, read back from real ones.

Each test runs real batches (Spark on the session's warm Spark Connect server) and then reads what
the docs (docs/sinks.md, docs/concepts.md) tell a user to look for, the way a user would: plain
SQL on the ledger, delta-rs, PyIceberg's SqlCatalog, the filesystem. A statement the code does not
keep fails here, not in a user's notebook.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg2
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.readers import committed_outputs

from .helpers import produce
from .pipeline import run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

# docs/sinks.md: "Every table commit records ..."
COMMIT_KEYS = {
    "kafka-offsets.pipeline",
    "kafka-offsets.pipeline-uid",
    "kafka-offsets.batch",
    "kafka-offsets.epoch",
    "kafka-offsets.attempt",
    "kafka-offsets.records",
    "kafka-offsets.operation",
    "kafka-offsets.ranges",
}
# docs/concepts.md: the ledger's tables
LEDGER_TABLES = {"pipelines", "cursors", "batches", "batch_ranges", "attempts", "audit"}
ATTEMPT_ID = r"[A-Za-z0-9_.-]+"


def ledger_sql(stack, sql: str, *params: object) -> list[tuple]:
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def pipeline_uid(stack, schema: str, pipeline: str) -> str:
    """The pipeline's unique id as the docs say to find it: ``pipelines.uid`` in the ledger."""
    return str(ledger_sql(stack, f"SELECT uid FROM {schema}.pipelines WHERE name = %s", pipeline)[0][0])


def test_delta_app_transaction_location_layout_and_commit_info(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    root = (tmp_path / "lake").resolve()
    spec = build_spec(
        "docs_delta", [topic], str(root), sink={"format": "delta", "table": "orders", "partition_by": "day"}
    )
    produce(stack.bootstrap_servers, topic, 50, 2)
    assert run_once(ledger, spec, stack).plan.batch_id == 1
    produce(stack.bootstrap_servers, topic, 30, 2)
    assert run_once(ledger, spec, stack).plan.batch_id == 2
    uid = pipeline_uid(stack, ledger.schema, spec.name)

    # "the table is <output_root>/<table>"
    table = DeltaTable(str(root / "orders"))
    assert (root / "orders" / "_delta_log").is_dir()
    # "txnAppId = airflow-kafka-offsets-<pipeline uid>, txnVersion = the batch number"
    assert table.transaction_version(f"airflow-kafka-offsets-{uid}") == 2
    assert table.transaction_version(uid) is None  # the bare uid is not the app id
    # "partition column timestamp_date"
    assert table.metadata().partition_columns == ["timestamp_date"]
    # "Spark writes <table>/batch=<N>/<attempt>/", N zero-padded to 12 digits
    paths = table.get_add_actions(flatten=True).column("path").to_pylist()
    assert paths and all(
        re.fullmatch(rf"batch=00000000000[12]/{ATTEMPT_ID}/timestamp_date=[0-9-]+/[^/]+\.parquet", p) for p in paths
    ), paths
    # "every table commit records kafka-offsets.pipeline, .pipeline-uid, ..."
    commits = [c for c in table.history() if "kafka-offsets.batch" in c]
    assert len(commits) == 2
    for commit in commits:
        assert COMMIT_KEYS <= set(commit), commit
        assert commit["kafka-offsets.pipeline-uid"] == uid
        assert commit["kafka-offsets.pipeline"] == spec.name
        assert commit["kafka-offsets.operation"] == "commit"
        ranges = json.loads(commit["kafka-offsets.ranges"])
        assert {"topic", "partition", "start", "end"} <= set(ranges[0])


def test_iceberg_location_catalog_rows_layout_and_snapshot_summary(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    root = (tmp_path / "lake").resolve()
    spec = build_spec(
        "docs_iceberg",
        [topic],
        str(root),
        sink={"format": "iceberg", "table": "analytics.orders", "partition_by": "day"},
    )
    produce(stack.bootstrap_servers, topic, 40, 2)
    assert run_once(ledger, spec, stack).plan.batch_id == 1
    uid = pipeline_uid(stack, ledger.schema, spec.name)

    # "the SQL catalog named after the ledger's schema, rows in iceberg_tables of the ledger's database"
    rows = ledger_sql(
        stack,
        "SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = %s",
        ledger.schema,
    )
    assert rows == [("analytics", "orders")]
    catalog = SqlCatalog(ledger.schema, uri=stack.pg_url())
    table = catalog.load_table("analytics.orders")
    # "created under <output_root>/<namespace>/<name>"
    assert table.location() == f"file://{root}/analytics/orders"
    assert not (root / "analytics.db").exists()
    # "hidden partitioning day(timestamp)"
    (field,) = table.spec().fields
    assert (str(field.transform), table.schema().find_column_name(field.source_id)) == ("day", "timestamp")
    # "Spark writes <table>/data/batch=<N>/<attempt>/"
    data_files = [task.file.file_path for task in table.scan().plan_files()]
    prefix = f"file://{root}/analytics/orders/data/batch=000000000001/"
    assert data_files and all(p.startswith(prefix) and re.match(ATTEMPT_ID + "/", p[len(prefix) :]) for p in data_files)
    # "every table commit records ..." (the snapshot summary)
    summaries = [s.summary for s in table.snapshots() if s.summary and s.summary["kafka-offsets.batch"]]
    assert len(summaries) == 1
    summary = summaries[0].additional_properties
    assert COMMIT_KEYS <= set(summary), summary
    assert summary["kafka-offsets.pipeline-uid"] == uid


def test_directory_layout_ledger_tables_and_reader_contract(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    root = (tmp_path / "out").resolve()
    spec = build_spec("docs_dirs", [topic], str(root))
    produce(stack.bootstrap_servers, topic, 20, 2)
    assert run_once(ledger, spec, stack).plan.batch_id == 1

    # "the ledger (<schema>.pipelines, cursors, batches, batch_ranges, attempts, audit)"
    tables = ledger_sql(
        stack, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", ledger.schema
    )
    assert LEDGER_TABLES <= {t for (t,) in tables}
    # "batches with state = 'committed' and kind = 'ingest', in batch_id order; each one's output_uri"
    (row,) = ledger_sql(
        stack,
        f"SELECT batch_id, output_uri FROM {ledger.schema}.batches"
        " WHERE pipeline = %s AND state = 'committed' AND kind = 'ingest' ORDER BY batch_id",
        spec.name,
    )
    batch_dir = root / "docs_dirs" / "batch=000000000001"
    assert row == (1, f"file://{batch_dir}")
    # "_SUCCESS, _kafka_batch_report.json ... are not data"; the data is Parquet
    names = {p.name for p in batch_dir.iterdir()}
    assert {"_SUCCESS", "_kafka_batch_report.json"} <= names
    assert any(n.endswith(".parquet") for n in names)
    # "committed_outputs lists exactly those locations": batch_id, uri, path, records, committed_at
    (output,) = committed_outputs(ledger, spec.name)
    assert (output.batch_id, output.uri, Path(output.path), output.records) == (1, row[1], batch_dir, 20)
    assert output.committed_at is not None
    # "each Spark run of a batch ... <root>/_staging/<pipeline>/batch=<N>/<attempt>/"
    (staging,) = ledger_sql(stack, f"SELECT staging_uri FROM {ledger.schema}.attempts WHERE pipeline = %s", spec.name)
    assert re.fullmatch(
        rf"file://{re.escape(str(root))}/_staging/docs_dirs/batch=000000000001/{ATTEMPT_ID}", staging[0]
    )
