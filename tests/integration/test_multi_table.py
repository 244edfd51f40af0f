"""One pipeline, many tables: topics (or a header) routed to their own Iceberg or Delta tables.

On the real stack, with readers we did not write: PyIceberg reads every table at the snapshot ids
the ledger recorded for each committed batch, delta-rs at the versions. Records carry unique ids;
every id lands once, in its topic's table, and no batch is ever in one table and not in another.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg2
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from airflow_kafka_offsets.core.model import BatchState, PipelineSpec
from airflow_kafka_offsets.core.spec import build_spec, updated_spec
from airflow_kafka_offsets.errors import SpecChangeRefusedError, UnroutableRecordsError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.readers import committed_outputs
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.change_spec import change_spec
from airflow_kafka_offsets.service.operations.replay import replay_batch
from airflow_kafka_offsets.service.operations.status import pipeline_status, render_status
from airflow_kafka_offsets.sinks.delta import DeltaSink

from .helpers import produce, refused
from .pipeline import commit, commit_dies_at, operation_context, plan, read, run_once, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

TABLES = 10


def topic_spec(name: str, topics: list[str], root: Path, sink_format: str) -> PipelineSpec:
    namespace = "lake." if sink_format == "iceberg" else ""
    tables = {topic: f"{namespace}t{i}" for i, topic in enumerate(topics)}
    return build_spec(name, topics, str(root), sink={"format": sink_format, "tables": tables})


def produce_round(stack, topics: list[str], per_topic: int) -> dict[str, set[str]]:
    """``per_topic`` records with unique ids into each topic; the ids per topic."""
    return {t: {p["id"] for p in produce(stack.bootstrap_servers, t, per_topic, 1)} for t in topics}


@functools.cache
def catalog_of(uri: str, name: str) -> SqlCatalog:
    return SqlCatalog(name, uri=uri)


def iceberg_ids_at(stack, ledger: Ledger, table: str, snapshot_id: int | None) -> Counter:
    """The ids PyIceberg reads from ``table`` at ``snapshot_id`` (its catalog rows are in the ledger's database)."""
    scan = catalog_of(stack.pg_url(), ledger.schema).load_table(table).scan(snapshot_id=snapshot_id)
    return Counter(k.decode() for k in scan.to_arrow().column("key").to_pylist())


def delta_ids_at(root: Path, table: str, version: int | None) -> Counter:
    location = files.join(files.location_uri(str(root)), table)
    dt = DeltaTable(location) if version is None else DeltaTable(location, version=version)
    return Counter(k.decode() for k in dt.to_pyarrow_table(columns=["key"]).column("key").to_pylist())


def assert_each_commit_names_its_tables_own_records(
    ledger: Ledger, spec: PipelineSpec, commits: Any, rounds: list[dict[str, set[str]]]
) -> None:
    """docs/sinks.md: a table's commit says which Kafka offsets it holds: that table's records, and its
    own topic's partition (where its records are in the batch's range), never the other topics'.
    ``commits(table)``: the pipeline's commit summaries in the table's history, oldest first."""
    for topic, table in dict(spec.sink.routes.topics).items():
        summaries = [c for c in commits(table) if c.get("kafka-offsets.operation") == "commit"]
        assert [c["kafka-offsets.batch"] for c in summaries] == [str(k) for k in range(1, len(rounds) + 1)]
        for k, summary in enumerate(summaries, start=1):
            (batch_range,) = [r for r in ledger.batch(spec.name, k).plan.ranges if r.topic == topic]
            (landed,) = json.loads(summary["kafka-offsets.ranges"])
            n = len(rounds[k - 1][topic])
            assert summary["kafka-offsets.records"] == str(n)
            assert (landed["topic"], landed["partition"], landed["start"], landed["records"]) == (
                topic,
                0,
                batch_range.start,
                n,
            )
            assert batch_range.start + n <= landed["end"] <= batch_range.end


def assert_every_batch_in_every_table(
    ledger: Ledger, spec: PipelineSpec, rounds: list[dict[str, set[str]]], ids_at: Any, key: str
) -> None:
    """At each committed batch's snapshots (or versions), every table holds exactly the ids of batches
    1..k of its topic, each once: no batch is in one table and absent from another."""
    outputs = committed_outputs(ledger, spec.name)
    assert [o.batch_id for o in outputs] == list(range(1, len(rounds) + 1))
    tables = dict(spec.sink.routes.topics)
    latest: dict[str, Any] = {}
    for k, output in enumerate(outputs, start=1):
        assert set(tables.values()) <= set(output.tables)  # batch 3 of the Iceberg test also fills lake.extra
        assert all(output.tables[t]["records"] == len(rounds[k - 1][topic]) for topic, t in tables.items())
        latest.update({t: entry[key] for t, entry in output.tables.items()})
        for topic, table in tables.items():
            expected = set().union(*(r[topic] for r in rounds[:k]))
            seen = ids_at(table, latest[table])
            assert set(seen) == expected, f"{table} at batch {k}"
            assert max(seen.values()) == 1, f"{table} at batch {k} holds an id twice"


def test_ten_topics_into_ten_iceberg_tables_commit_atomically_with_the_cursor(stack, ledger, make_topic, tmp_path):
    topics = [make_topic(partitions=1) for _ in range(TABLES)]
    spec = topic_spec("multi_ice", topics, tmp_path / "lake", "iceberg")
    rounds = [produce_round(stack, topics, 20)]
    assert run_once(ledger, spec, stack).records == 20 * TABLES  # batch 1 creates the ten tables

    # batch 2: the worker dies inside the commit transaction, after every table's pointer moved in it:
    # the rollback takes all ten back; no reader sees batch 2 in any table
    rounds.append(produce_round(stack, topics, 15))
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    commit_dies_at(ledger, spec, 2, "in_commit_transaction")
    for i, topic in enumerate(topics):
        assert set(iceberg_ids_at(stack, ledger, f"lake.t{i}", None)) == rounds[0][topic]
    assert commit(ledger, spec, 2).committed_now

    # batch 3: a route to a table that does not exist yet is created in the commit (change-spec adds it)
    new_topic = make_topic(partitions=1)
    wider = updated_spec(
        spec,
        {
            "topics": [*topics, new_topic],
            "sink": {"format": "iceberg", "tables": {**dict(spec.sink.routes.topics), new_topic: "lake.extra"}},
        },
    )
    ctx = operation_context(ledger, stack)
    change_spec(ctx, spec.name, wider, dry_run=False)
    moved = {**dict(wider.sink.routes.topics), topics[0]: "lake.other"}
    with refused(SpecChangeRefusedError, f"topic {topics[0]!r} has committed data in 'lake.t0'"):
        change_spec(ctx, spec.name, updated_spec(wider, {"sink": {"format": "iceberg", "tables": moved}}))
    rounds.append({**produce_round(stack, topics, 5)})
    extra = {p["id"] for p in produce(stack.bootstrap_servers, new_topic, 7, 1)}
    assert run_once(ledger, wider, stack).records == 5 * TABLES + 7
    assert set(iceberg_ids_at(stack, ledger, "lake.extra", None)) == extra

    def iceberg_commits(table: str) -> list[dict]:
        snapshots = catalog_of(stack.pg_url(), ledger.schema).load_table(table).snapshots()
        return [dict(s.summary.additional_properties) for s in snapshots if s.summary is not None]

    assert_each_commit_names_its_tables_own_records(ledger, spec, iceberg_commits, rounds)
    assert_every_batch_in_every_table(
        ledger, spec, rounds, lambda t, s: iceberg_ids_at(stack, ledger, t, s), "snapshot_id"
    )
    # docs/sinks.md: the ledger's batches.tables, read with plain SQL, and status, say the same
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            f"SELECT batch_id, tables FROM {ledger.schema}.batches WHERE pipeline = %s ORDER BY 1", (spec.name,)
        )
        by_sql = dict(cur.fetchall())
    assert by_sql == {o.batch_id: o.tables for o in committed_outputs(ledger, spec.name)}
    with ledger.transaction() as tx:
        assert {b.batch_id: b.tables for b in tx.recent_batches(spec.name, 10)} == by_sql
    assert set(by_sql[3]["lake.t0"]) == {"snapshot_id", "records", "table_uuid"}
    uuid_now = catalog_of(stack.pg_url(), ledger.schema).load_table("lake.t0").metadata.table_uuid
    assert by_sql[3]["lake.t0"]["table_uuid"] == str(uuid_now)  # what the next plan checks the table against
    # replay rewrites batch 1 in every table in one transaction: the same ids, once
    before = committed_outputs(ledger, spec.name)[0].tables
    replay_batch(operation_context(ledger, stack, submitter(stack)), spec.name, 1)
    for i, topic in enumerate(topics):
        seen = iceberg_ids_at(stack, ledger, f"lake.t{i}", None)
        assert set(seen) == set().union(*(r[topic] for r in rounds)) and max(seen.values()) == 1
    replayed = committed_outputs(ledger, spec.name)[0].tables
    assert all(replayed[t]["snapshot_id"] != before[t]["snapshot_id"] for t in before)


def test_ten_topics_into_ten_delta_tables_a_retry_finishes_the_tables_a_crash_left(
    stack, ledger, make_topic, tmp_path, monkeypatch
):
    topics = [make_topic(partitions=1) for _ in range(TABLES)]
    root = tmp_path / "lake"
    spec = topic_spec("multi_delta", topics, root, "delta")
    rounds = [produce_round(stack, topics, 20)]
    assert run_once(ledger, spec, stack).records == 20 * TABLES

    # batch 2: the worker dies after four tables' Delta commits; the retry commits the other six, then
    # the ledger, and never adds a table's part twice
    rounds.append(produce_round(stack, topics, 15))
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    original = DeltaSink.commit_once
    committed: list[str] = []

    def dies_after_four(self: DeltaSink, publication: Any, files_uri: str) -> int:
        if len(committed) == 4:
            raise SystemExit("worker killed between table commits")
        committed.append(self.table_name)
        return original(self, publication, files_uri)

    monkeypatch.setattr(DeltaSink, "commit_once", dies_after_four)
    with pytest.raises(SystemExit):
        commit(ledger, spec, 2)
    monkeypatch.setattr(DeltaSink, "commit_once", original)
    assert ledger.batch(spec.name, 2).state is BatchState.PLANNED
    holding = [t for t in (f"t{i}" for i in range(TABLES)) if len(delta_ids_at(root, t, None)) == 35]
    assert committed == ["t0", "t1", "t2", "t3"]  # table after table, in the order of their names
    assert holding == committed  # between the table commits and the ledger's: these four only
    assert commit(ledger, spec, 2).committed_now

    # batch 3 dies after every table's commit, before the ledger's; the retry commits the ledger alone
    rounds.append(produce_round(stack, topics, 5))
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    commit_dies_at(ledger, spec, 3, "after_publish")
    assert commit(ledger, spec, 3).committed_now
    assert_every_batch_in_every_table(ledger, spec, rounds, lambda t, v: delta_ids_at(root, t, v), "version")

    def delta_commits(table: str) -> list[dict]:
        return DeltaTable(files.join(files.location_uri(str(root)), table)).history()[::-1]

    assert_each_commit_names_its_tables_own_records(ledger, spec, delta_commits, rounds)

    # replay rewrites batch 1 in every table (a Delta commit each); the ledger names the new versions
    before = committed_outputs(ledger, spec.name)[0].tables
    replay_batch(operation_context(ledger, stack, submitter(stack)), spec.name, 1)
    after = committed_outputs(ledger, spec.name)[0].tables
    assert all(after[t]["version"] > before[t]["version"] for t in before)
    for i, topic in enumerate(topics):
        seen = delta_ids_at(root, f"t{i}", None)
        assert set(seen) == set().union(*(r[topic] for r in rounds)) and max(seen.values()) == 1

    # abort: a batch a crash left in some tables leaves all of them
    produce_round(stack, topics, 3)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    commit_dies_at(ledger, spec, 4, "after_publish")
    abort_planned_batch(operation_context(ledger, stack), spec.name, "test")
    for i, topic in enumerate(topics):
        assert set(delta_ids_at(root, f"t{i}", None)) == set().union(*(r[topic] for r in rounds))


def produce_with_headers(stack, topic: str, values: list[str | None]) -> list[dict]:
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "enable.idempotence": True})
    acked: list[dict] = []

    def delivered(value: str | None):
        def on_delivery(err, msg):
            assert err is None, err
            acked.append({"id": msg.key().decode(), "offset": msg.offset(), "table": value})

        return on_delivery

    for value in values:
        rid = uuid.uuid4().hex
        headers = [("table", value.encode())] if value is not None else [("other", b"x")]
        producer.produce(
            topic, key=rid.encode(), value=b"{}", partition=0, headers=headers, on_delivery=delivered(value)
        )
    assert producer.flush(30) == 0
    return acked


def test_a_header_routes_records_and_unknown_values_go_to_the_errors_output_or_refuse_the_batch(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1)
    route = {"pattern": "hdr.{header:table}", "allow": ["hdr.a", "hdr.b"], "unknown": "errors"}
    spec = build_spec("routed", [topic], str(tmp_path / "lake"), sink={"format": "iceberg", "route": route})
    sent = produce_with_headers(stack, topic, ["a", "b", "zzz", None, "a", "b", "a"])
    assert run_once(ledger, spec, stack).records == 7
    for table in ("a", "b"):
        expected = {r["id"] for r in sent if r["table"] == table}
        assert iceberg_ids_at(stack, ledger, f"hdr.{table}", None) == Counter(expected)
    output = committed_outputs(ledger, spec.name)[0]
    assert {t: e["records"] for t, e in output.tables.items()} == {"hdr.a": 3, "hdr.b": 2}
    text = render_status(pipeline_status(operation_context(ledger, stack), spec.name))
    for table, records in (("hdr.a", 3), ("hdr.b", 2)):  # status: a row per batch and table
        assert re.search(rf"^1\s+{re.escape(table)}\s+{output.tables[table]['snapshot_id']}\s+{records}$", text, re.M)
    with ledger.transaction() as tx:
        attempt = tx.latest_succeeded_attempt(spec.name, 1)
    assert attempt.staging_uri.startswith(files.location_uri(str(tmp_path / "lake")) + "/_batches/routed/batch=")
    errors = pq.read_table(Path(files.join(attempt.staging_uri, "_errors").removeprefix("file://")))
    assert sorted(errors.column("offset").to_pylist()) == [2, 3]  # "zzz", and no header: with their offsets
    assert set(errors.column("route_error").to_pylist()) == {
        "no route: the record's topic has no table and its header names no allowed table"
    }

    refusing = build_spec(
        "refusing",
        [topic],
        str(tmp_path / "lake2"),
        sink={"format": "iceberg", "route": {**route, "unknown": "refuse"}},
    )
    outcome = plan(ledger, refusing, stack)
    with refused(UnroutableRecordsError, r"2 records have no table \(header 'table' values: 'zzz', \(no header\)"):
        read(ledger, refusing, stack, outcome)
    assert ledger.batch(refusing.name, 1).state is BatchState.PLANNED
    with ledger.transaction() as tx:
        assert tx.cursors(refusing.name) == {} or set(tx.cursors(refusing.name).values()) == {0}
    assert sum(iceberg_ids_at(stack, ledger, "hdr.a", None).values()) == 3  # the refused batch added nothing
