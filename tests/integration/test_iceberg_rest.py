"""An Iceberg sink whose catalog is a REST catalog: the stack's Apache Iceberg REST catalog server (JDBC
catalog in PostgreSQL, table files on the stack's S3 or, for a pipeline rooted on local disk, under its
root; OAuth2 client credentials).

The table commit cannot share the ledger's transaction: the sink commits just before the ledger's,
idempotently. Checked here against the real server, read back with PyIceberg's RestCatalog (another
client, the bearer token): a foreign writer appending to the table while a batch is in flight, a
worker that dies between the table commit and the ledger's, an abort that takes such a batch back
out, a replay that rewrites a batch in one commit, and credentials the catalog refuses.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import psycopg2
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import EqualTo
from pyiceberg.types import LongType

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import (
    CatalogAuthenticationError,
    CatalogUnavailableError,
    MergeOperationRefusedError,
    OutputTableChangedError,
    SchemaEvolutionError,
)
from airflow_kafka_offsets.hooks.iceberg_rest import IcebergRestCatalogHook
from airflow_kafka_offsets.readers import committed_outputs
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.replay import replay_batch
from airflow_kafka_offsets.service.operations.status import pipeline_status, render_status
from airflow_kafka_offsets.sinks import iceberg_rest_transaction as rest_transaction
from airflow_kafka_offsets.sinks.iceberg import IcebergSink
from airflow_kafka_offsets.sinks.schema import RECORD_SCHEMA
from faults_harness import lake_readers

from .cdc_source import Source, first_changes, mirror, mirror_spec, moving_changes
from .helpers import assert_exactly_once, produce, refused
from .network import Forwarder
from .pipeline import commit, commit_dies_at, operation_context, plan, read, run_once, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

CONN_ID = "iceberg_rest_default"  # the stack's REST catalog, in the environment the stack fixture sets
FOREIGN = b"other-writer"


def reader(stack) -> RestCatalog:
    """A client that knows nothing of the ledger: the bearer token, S3 credentials vended by the catalog."""
    return lake_readers.rest_reader(stack)


def rows_of(table: pa.Table) -> list[dict]:
    return table.select(["key", "partition", "offset"]).to_pylist()


def ours(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["key"] != FOREIGN]


def ledger_rows(stack, schema: str, pipeline: str) -> list[tuple]:
    """(batch, state) of every batch the ledger holds for the pipeline."""
    conn = psycopg2.connect(stack.pg_dsn())
    try:
        with conn.cursor() as cur:
            cur.execute(f'SELECT batch_id, state FROM "{schema}".batches WHERE pipeline = %s ORDER BY 1', (pipeline,))
            return cur.fetchall()
    finally:
        conn.close()


def test_a_rest_catalog_table_gets_every_batch_once_beside_a_foreign_writer_and_worker_deaths(
    stack, ledger, make_topic
):
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    topic = make_topic(partitions=2)
    sink = {"format": "iceberg", "table": f"{namespace}.events", "catalog_conn_id": CONN_ID}
    spec = build_spec("rest", [topic], f"s3://{stack.s3_bucket}/{namespace}", sink=sink)
    produced = produce(stack.bootstrap_servers, topic, 80, 2)
    outcome = plan(ledger, spec, stack)  # creates the table through the REST catalog
    read(ledger, spec, stack, outcome)

    catalog = reader(stack)
    table = catalog.load_table((namespace, "events"))
    assert table.location().startswith(f"s3://{stack.s3_bucket}/iceberg-rest/{namespace}/")
    # another writer appends to the same table while the batch is in flight: the commit that follows
    # asserts a snapshot that is no longer current, is refused (409), reads the table again and retries
    foreign = {"key": FOREIGN, "value": b"x", "topic": "elsewhere", "partition": 0, "offset": 0}
    table.append(pa.Table.from_pylist([foreign], schema=RECORD_SCHEMA))

    def table_rows() -> list[dict]:
        return rows_of(catalog.load_table((namespace, "events")).scan().to_arrow())

    # the table commit lands, then the worker dies before the ledger's commit
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
    assert len(table_rows()) == 81
    assert ledger.batch(spec.name, 1).state.value == "planned"
    done = commit(ledger, spec, outcome.plan.batch_id)  # finds its snapshot in the history: adds nothing again
    assert done.committed_now and done.records == 80
    rows = table_rows()
    assert_exactly_once(ours(rows), produced)
    assert len(rows) == 81

    # a batch a crash left in the table is taken back out by an abort, in a new snapshot
    produce(stack.bootstrap_servers, topic, 20, 2)
    second = plan(ledger, spec, stack)
    read(ledger, spec, stack, second)
    commit_dies_at(ledger, spec, second.plan.batch_id, "after_publish")
    assert len(table_rows()) == 101
    ctx = operation_context(ledger, stack, submitter(stack, output_root=spec.output_root))
    abort_planned_batch(ctx, spec.name, "test")
    rows = table_rows()
    assert_exactly_once(ours(rows), produced)
    assert len(rows) == 81

    # a replay rewrites batch 1 in one commit: the same records, once
    replay_batch(ctx, spec.name, 1)
    rows = table_rows()
    assert_exactly_once(ours(rows), produced)
    assert len(rows) == 81
    history = catalog.load_table((namespace, "events")).snapshots()
    keys = ("kafka-offsets.operation", "kafka-offsets.batch", "kafka-offsets.pipeline-uid")
    operations = [
        tuple(s.summary[k] for k in keys)
        for s in history
        if s.summary is not None and s.summary["kafka-offsets.batch"] is not None
    ]
    uid = operations[0][2]
    assert uid
    assert operations == [("commit", "1", uid), ("commit", "2", uid), ("abort", "2", uid), ("replay", "1", uid)]
    assert len(history) == 5  # the foreign append and those four
    assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "committed"), (2, "aborted")]


@pytest.mark.parametrize("tables", [1, 2])
def test_rest_catalog_tables_under_a_local_root_get_every_batch_once_through_a_crash(
    stack, ledger, make_topic, tmp_path, tables
):
    """A pipeline whose root is on local disk, into one table or two (one per topic, committed in one
    catalog transaction): the REST catalog creates each table under the root (the catalog server writes
    its metadata there through HadoopFileIO; Spark's data files are under the root too, the worker commits
    them); a worker dies between the table commits and the ledger's; read back through the catalog, every
    id is there once."""
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    topics = [make_topic(partitions=2) for _ in range(tables)]
    names = {topic: f"events{i}" for i, topic in enumerate(topics)}
    if tables == 1:
        sink = {"format": "iceberg", "table": f"{namespace}.{names[topics[0]]}", "catalog_conn_id": CONN_ID}
    else:
        sink = {
            "format": "iceberg",
            "tables": {t: f"{namespace}.{n}" for t, n in names.items()},
            "catalog_conn_id": CONN_ID,
        }
    root = tmp_path / "lake"
    spec = build_spec(f"rest_local_{tables}", topics, str(root), sink=sink)
    produced = {t: produce(stack.bootstrap_servers, t, 40, 2) for t in topics}
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
    assert commit(ledger, spec, outcome.plan.batch_id).committed_now
    for topic in topics:
        produced[topic] += produce(stack.bootstrap_servers, topic, 20, 2)
    assert run_once(ledger, spec, stack) is not None

    for topic, name in names.items():
        table = reader(stack).load_table((namespace, name))
        location = root / namespace / name
        assert table.location() == f"file://{location}"
        assert (location / "metadata").is_dir()  # the catalog server's, through HadoopFileIO
        data = [task.file.file_path for task in table.scan().plan_files()]
        assert data and all(path.startswith(f"file://{root}/") for path in data)  # Spark's, under the root
        assert {s.summary["kafka-offsets.batch"] for s in table.snapshots() if s.summary} == {"1", "2"}
        rows = rows_of(table.scan().to_arrow())
        assert len(rows) == 60
        assert_exactly_once(rows, produced[topic])
    assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "committed"), (2, "committed")]


@pytest.mark.parametrize("wrong", ["secret", "token"])
def test_credentials_the_rest_catalog_refuses_fail_clearly_and_change_nothing(
    stack, ledger, make_topic, monkeypatch, wrong
):
    connection = stack.iceberg_rest_connection(secret="not-the-secret")
    if wrong == "token":
        connection = {**connection, "login": None, "password": None}
        connection["extra"] = {**connection["extra"], "token": "not-the-token"}
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_WRONG", json.dumps(connection))
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 5, 1)
    sink = {"format": "iceberg", "table": f"{namespace}.events", "catalog_conn_id": "iceberg_wrong"}
    spec = build_spec("rest_wrong", [topic], f"s3://{stack.s3_bucket}/{namespace}", sink=sink)
    expected = "invalid_client" if wrong == "secret" else "bearer token"
    with refused(CatalogAuthenticationError, rf"refused the connection's credentials: .*{expected}"):
        plan(ledger, spec, stack)
    assert ledger_rows(stack, ledger.schema, spec.name) == []
    assert namespace not in [n[0] for n in reader(stack).list_namespaces()]
    ok, message = IcebergRestCatalogHook("iceberg_wrong").test_connection()
    assert not ok and "CatalogAuthenticationError" in message
    assert "not-the" not in message


def test_the_connection_test_lists_the_catalogs_namespaces(stack):
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    reader(stack).create_namespace(namespace)
    ok, message = IcebergRestCatalogHook(CONN_ID).test_connection()
    count = len(reader(stack).list_namespaces())
    assert (ok, message) == (True, f"the catalog answers; {count} namespace(s)")


def test_a_rest_table_changed_by_someone_else_between_batches_is_refused_at_plan_and_nothing_changes(
    stack, ledger, make_topic
):
    """After a committed batch, another client of the catalog retypes a column the sink writes, drops one,
    drops the table, then creates another of the same name: each next plan is refused naming the table
    (the column, the batch, what changed); the ledger keeps its one batch and the catalog gets nothing."""
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    table = f"{namespace}.events"
    topic = make_topic(partitions=1)
    spec = build_spec(
        "rest_changed",
        [topic],
        f"s3://{stack.s3_bucket}/{namespace}",
        sink={"format": "iceberg", "table": table, "catalog_conn_id": CONN_ID},
    )
    produce(stack.bootstrap_servers, topic, 20, 1)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    assert commit(ledger, spec, outcome.plan.batch_id).records == 20
    produce(stack.bootstrap_servers, topic, 20, 1)
    catalog = reader(stack)

    def refused_plan(error: type[Exception], match: str) -> None:
        with refused(error, match):
            plan(ledger, spec, stack)
        assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "committed")]

    with catalog.load_table(table).update_schema() as update:
        update.update_column("partition", LongType())
    refused_plan(SchemaEvolutionError, rf"^Iceberg table {table}: .*partition would change from int64 to int32")
    with catalog.load_table(table).update_schema() as update:
        update.delete_column("timestampType")
    refused_plan(SchemaEvolutionError, rf"^Iceberg table {table}: column\(s\) timestampType .* dropped from the table")
    assert "timestampType" not in catalog.load_table(table).schema().column_names  # not added back

    catalog.drop_table(table)
    refused_plan(
        OutputTableChangedError,
        rf"^Iceberg table {table} \(catalog '{CONN_ID}'\) was dropped since batch 1 committed to it: .*"
        "Nothing was planned. Restore the table .* or reset the pipeline",
    )
    assert not catalog.table_exists(table)

    replacement = catalog.create_table(table, schema=RECORD_SCHEMA)
    refused_plan(
        OutputTableChangedError,
        rf"^Iceberg table {table} \(catalog '{CONN_ID}'\) was replaced by another table of the same name \(table "
        rf"uuid \S+, now {replacement.metadata.table_uuid}\) since batch 1 committed to it",
    )
    assert catalog.load_table(table).snapshots() == []


def test_many_rest_tables_one_of_them_dropped_by_someone_else_are_refused_at_plan(stack, ledger, make_topic):
    topics, tables, spec, _, outcome = two_tables_read(stack, ledger, make_topic, "rest_many_dropped")
    commit(ledger, spec, outcome.plan.batch_id)
    catalog = reader(stack)
    catalog.drop_table(tables[topics[1]])
    for topic in topics:
        produce(stack.bootstrap_servers, topic, 5, 1)
    with refused(OutputTableChangedError, rf"^Iceberg table {tables[topics[1]]} .* was dropped since batch 1"):
        plan(ledger, spec, stack)
    assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "committed")]
    assert not catalog.table_exists(tables[topics[1]])


def two_tables_read(stack, ledger, make_topic, name: str) -> tuple[list[str], dict[str, str], Any, dict, Any]:
    """A pipeline of two topics into two tables of a new namespace of the REST catalog, its first batch
    (12 records per topic) planned and read: (topics, table per topic, spec, ids per topic, the plan)."""
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    topics = [make_topic(partitions=1) for _ in range(2)]
    tables = {topic: f"{namespace}.t{i}" for i, topic in enumerate(topics)}
    sink = {"format": "iceberg", "tables": tables, "catalog_conn_id": CONN_ID}
    spec = build_spec(name, topics, f"s3://{stack.s3_bucket}/{namespace}", sink=sink)
    produced = {t: produce(stack.bootstrap_servers, t, 12, 1) for t in topics}
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    return topics, tables, spec, produced, outcome


def test_many_tables_in_a_rest_catalog_commit_table_by_table_and_a_retry_finishes_them(
    stack, ledger, make_topic, monkeypatch
):
    """A REST catalog whose server does not list the multi-table transaction endpoint (the stack's does:
    it is hidden from the client here) gets its tables committed one after another."""
    monkeypatch.setattr(rest_transaction, "commits_together", lambda catalog: False)
    topics, tables, spec, produced, outcome = two_tables_read(stack, ledger, make_topic, "rest_many")

    # the worker dies after the first table's commit: one table holds the batch, the other not yet
    original = IcebergSink.commit_idempotently
    committed: list[str] = []

    def dies_after_one(self: IcebergSink, publication: Any, data: list[str]) -> int:
        if committed:
            raise SystemExit("worker killed between table commits")
        committed.append(self.table_name)
        return original(self, publication, data)

    monkeypatch.setattr(IcebergSink, "commit_idempotently", dies_after_one)
    with pytest.raises(SystemExit):
        commit(ledger, spec, outcome.plan.batch_id)
    monkeypatch.setattr(IcebergSink, "commit_idempotently", original)
    catalog = reader(stack)

    def rows(table: str) -> list[dict]:
        return rows_of(catalog.load_table(table).scan().to_arrow())

    assert committed == [tables[topics[0]]]
    assert (len(rows(tables[topics[0]])), rows(tables[topics[1]])) == (12, [])  # created, not yet committed to
    assert "tables committed one after another" in render_status(
        pipeline_status(operation_context(ledger, stack), spec.name)
    )

    done = commit(ledger, spec, outcome.plan.batch_id)  # skips the table that holds the batch
    assert done.committed_now and done.records == 24
    for topic, table in tables.items():
        assert_exactly_once(rows(table), produced[topic])
        (summary,) = [s.summary for s in catalog.load_table(table).snapshots() if s.summary is not None]
        (landed,) = json.loads(summary["kafka-offsets.ranges"])  # the table's own records, not the batch's
        assert (summary["kafka-offsets.records"], landed["topic"], landed["records"]) == ("12", topic, 12)
    snapshots = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in tables.values()}
    assert {t: e["snapshot_id"] for t, e in committed_outputs(ledger, spec.name)[0].tables.items()} == snapshots


def test_many_tables_in_a_rest_catalog_commit_in_one_transaction_that_a_foreign_writer_refuses_whole(
    stack, ledger, make_topic, monkeypatch
):
    """The stack's server implements ``POST /v1/{prefix}/transactions/commit``: a batch's tables commit in
    one transaction. A foreign append to one table between the staging and the request fails the whole
    transaction (no table gets the batch), which is staged again and lands in every table once; a worker
    killed after the transaction leaves the ledger to the next commit, which adds nothing again; an abort
    takes a batch out of every table in one transaction."""
    topics, tables, spec, produced, outcome = two_tables_read(stack, ledger, make_topic, "rest_together")
    catalog = reader(stack)

    def rows(table: str) -> list[dict]:
        return rows_of(catalog.load_table(table).scan().to_arrow())

    original = rest_transaction.commit_together
    requests: list[list[str]] = []

    def foreign_append_first(rest: Any, staged: list[Any]) -> None:
        requests.append(sorted(".".join(t._table.name()) for t in staged))
        if len(requests) == 1:
            foreign = {"key": FOREIGN, "value": b"x", "topic": "elsewhere", "partition": 0, "offset": 0}
            catalog.load_table(tables[topics[1]]).append(pa.Table.from_pylist([foreign], schema=RECORD_SCHEMA))
            with pytest.raises(CommitFailedException):
                original(rest, staged)
            assert (rows(tables[topics[0]]), len(rows(tables[topics[1]]))) == ([], 1)  # nothing of the batch
            raise CommitFailedException("refused whole: staged again")
        original(rest, staged)

    monkeypatch.setattr(rest_transaction, "commit_together", foreign_append_first)
    status = render_status(pipeline_status(operation_context(ledger, stack), spec.name))
    assert "tables committed together in one catalog transaction" in status
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")  # the transaction lands, then a kill
    assert requests == [sorted(tables.values())] * 2
    assert ledger.batch(spec.name, 1).state.value == "planned"
    for topic, table in tables.items():
        assert_exactly_once(ours(rows(table)), produced[topic])

    done = commit(ledger, spec, outcome.plan.batch_id)  # both tables hold the batch: no third request
    assert done.committed_now and done.records == 24
    assert len(requests) == 2
    for topic, table in tables.items():
        assert_exactly_once(ours(rows(table)), produced[topic])
        (summary,) = [
            s.summary for s in catalog.load_table(table).snapshots() if s.summary and s.summary["kafka-offsets.batch"]
        ]
        (landed,) = json.loads(summary["kafka-offsets.ranges"])
        assert (summary["kafka-offsets.records"], landed["topic"], landed["records"]) == ("12", topic, 12)
    snapshots = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in tables.values()}
    assert {t: e["snapshot_id"] for t, e in committed_outputs(ledger, spec.name)[0].tables.items()} == snapshots

    # a second batch a crash left in both tables goes out of both in one transaction
    for topic in topics:
        produce(stack.bootstrap_servers, topic, 5, 1)
    second = plan(ledger, spec, stack)
    read(ledger, spec, stack, second)
    commit_dies_at(ledger, spec, second.plan.batch_id, "after_publish")
    assert len(requests) == 3 and [len(ours(rows(t))) for t in tables.values()] == [17, 17]
    abort_planned_batch(
        operation_context(ledger, stack, submitter(stack, output_root=spec.output_root)), spec.name, "t"
    )
    assert len(requests) == 4 and requests[-1] == sorted(tables.values())
    for topic, table in tables.items():
        assert_exactly_once(ours(rows(table)), produced[topic])
    assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "committed"), (2, "aborted")]


# Serial: it bounds the cost of a silent catalog in seconds.
@pytest.mark.serial
def test_a_catalog_that_stops_answering_costs_its_timeout_and_a_lost_commit_answer_is_found_in_history(
    stack, ledger, make_topic, monkeypatch
):
    """The catalog behind a TCP forwarder, with a 3 s request timeout (the connection's extra). The answer
    to the table commit is lost on its way back (the server committed): the step fails within the timeout
    naming the catalog, the ledger stays as it was, and the retry finds the batch's snapshot in the table's
    history and commits the ledger alone. A catalog that takes connections and never answers fails the
    plan within the timeout, nothing planned."""
    rest = urlsplit(stack.iceberg_rest_uri)
    forwarder = Forwarder("127.0.0.1", (rest.hostname, rest.port))
    try:
        conn = stack.iceberg_rest_connection()
        conn["host"] = f"http://{forwarder.address[0]}:{forwarder.address[1]}{rest.path}"
        conn["extra"] = {**conn["extra"], "timeout": "3"}
        monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_REST_FORWARDED", json.dumps(conn))
        namespace = f"rest_{uuid.uuid4().hex[:8]}"
        topic = make_topic(partitions=2)
        sink = {"format": "iceberg", "table": f"{namespace}.events", "catalog_conn_id": "iceberg_rest_forwarded"}
        spec = build_spec("rest_silent", [topic], f"s3://{stack.s3_bucket}/{namespace}", sink=sink)
        produced = produce(stack.bootstrap_servers, topic, 30, 2)
        outcome = plan(ledger, spec, stack)
        read(ledger, spec, stack, outcome)

        original = IcebergSink._commit

        def answer_lost(self: IcebergSink, table: Any, publication: Any, data: list[str]) -> Any:
            forwarder.hold_answers()  # the table is loaded; the commit's request goes out, its answer never back
            return original(self, table, publication, data)

        monkeypatch.setattr(IcebergSink, "_commit", answer_lost)
        started = time.monotonic()
        with refused(CatalogUnavailableError, r"did not answer POST /v1/namespaces/\S+/tables/events within 3s"):
            commit(ledger, spec, outcome.plan.batch_id)
        assert time.monotonic() - started < 15
        monkeypatch.setattr(IcebergSink, "_commit", original)
        forwarder.thaw()
        assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "planned")]
        catalog = reader(stack)
        assert_exactly_once(rows_of(catalog.load_table((namespace, "events")).scan().to_arrow()), produced)

        done = commit(ledger, spec, outcome.plan.batch_id)  # the batch's snapshot is there: nothing added again
        assert done.committed_now and done.records == 30
        table = catalog.load_table((namespace, "events"))
        assert_exactly_once(rows_of(table.scan().to_arrow()), produced)
        assert len(table.snapshots()) == 1

        produce(stack.bootstrap_servers, topic, 10, 2)
        forwarder.freeze()  # connections are taken, nothing is answered
        started = time.monotonic()
        with refused(CatalogUnavailableError, r"iceberg_rest_forwarded.*did not answer (GET|POST) \S+ within 3s"):
            plan(ledger, spec, stack)
        assert time.monotonic() - started < 15
        assert ledger_rows(stack, ledger.schema, spec.name) == [(1, "committed")]
    finally:
        forwarder.close()


def test_a_mirror_in_a_rest_catalog_merges_each_batch_once_through_a_crash_an_abort_a_replay_and_another_writer(
    stack, ledger, make_topic
):
    """A mirror table (merge mode) in the REST catalog: each merge is a catalog commit of its own just before
    the ledger's, found in the table's history by a retry, taken back by an abort only while it is the table's
    latest commit, and applied on the table's state at commit time (another writer's commit is built upon)."""
    namespace = f"rest_{uuid.uuid4().hex[:8]}"
    topic = make_topic(partitions=2)
    root = f"s3://{stack.s3_bucket}/{namespace}"
    spec = mirror_spec("rest_mirror", topic, root, table=f"{namespace}.mirror", catalog_conn_id=CONN_ID)
    source = Source(stack.bootstrap_servers, topic)
    first_changes(source)
    assert run_once(ledger, spec, stack).records == 14
    assert mirror(stack, ledger, spec) == source.expected
    after_first = mirror(stack, ledger, spec)

    # batch 2: its merge lands in the table, then the worker dies before the ledger's commit: readers of the
    # table see it (the catalog's commit cannot wait for the ledger's); an abort puts back the state before it
    moving_changes(source, range(100, 106))
    second = plan(ledger, spec, stack)
    read(ledger, spec, stack, second)
    commit_dies_at(ledger, spec, second.plan.batch_id, "after_publish")
    assert ledger.batch(spec.name, 2).state.value == "planned"
    assert mirror(stack, ledger, spec) == source.expected
    ctx = operation_context(ledger, stack, submitter(stack, output_root=spec.output_root))
    abort_planned_batch(ctx, spec.name, "test")
    assert mirror(stack, ledger, spec) == after_first
    done = run_once(ledger, spec, stack)  # batch 3: the same range, merged once
    assert (done.plan.batch_id, done.records) == (3, second.plan.records_planned)
    assert mirror(stack, ledger, spec) == source.expected

    # batch 4: another writer commits after Spark read the batch; the merge is applied on top of it
    source.update(103, qty=0)
    source.flush()
    fourth = plan(ledger, spec, stack)
    read(ledger, spec, stack, fourth)
    table = reader(stack).load_table((namespace, "mirror"))
    extra = table.scan(limit=1).to_arrow().set_column(0, "id", pa.array([999], pa.int32()))
    table.append(extra)
    assert commit(ledger, spec, fourth.plan.batch_id).committed_now
    assert mirror(stack, ledger, spec) == {**source.expected, 999: extra.to_pylist()[0]}
    replay_batch(ctx, spec.name, 4)  # the latest commit: merged again on the state before it, the other row kept
    assert mirror(stack, ledger, spec) == {**source.expected, 999: extra.to_pylist()[0]}

    # batch 5 lands in the table, its worker dies, then another commit follows it: the abort would lose that
    # commit, so it is refused and changes nothing; the commit then records the merge the table holds, once
    source.delete(1)
    source.flush()
    fifth = plan(ledger, spec, stack)
    read(ledger, spec, stack, fifth)
    commit_dies_at(ledger, spec, fifth.plan.batch_id, "after_publish")
    table = reader(stack).load_table((namespace, "mirror"))
    table.delete(EqualTo("id", 999))
    with refused(MergeOperationRefusedError, "The batch stays planned: commit it instead"):
        abort_planned_batch(ctx, spec.name, "test")
    assert ledger.batch(spec.name, 5).state.value == "planned"
    done = commit(ledger, spec, fifth.plan.batch_id)
    assert done.committed_now and done.records == fifth.plan.records_planned
    assert mirror(stack, ledger, spec) == source.expected
    operations = [
        (s.summary["kafka-offsets.operation"], s.summary["kafka-offsets.batch"])
        for s in reader(stack).load_table((namespace, "mirror")).snapshots()
        if s.summary is not None and s.summary["kafka-offsets.batch"] is not None
    ]
    # each merge is a delete and an append snapshot of one catalog commit; the abort put back batch 1's files
    assert [op for op, _ in operations].count("abort") == 1
    assert sorted({batch for op, batch in operations if op == "commit"}) == ["1", "2", "3", "4", "5"]
    assert ledger_rows(stack, ledger.schema, spec.name) == [
        (1, "committed"),
        (2, "aborted"),
        (3, "committed"),
        (4, "committed"),
        (5, "committed"),
    ]
