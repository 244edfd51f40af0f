"""Mirror tables (merge mode) on the real stack: change events in Kafka, Spark's change set, the
Iceberg commit in the ledger's transaction, read back with PyIceberg (which knows nothing of the ledger).

The events follow Debezium's PostgreSQL connector's JSON (with and without the embedded schema):
``c``/``u``/``d`` with ``before``/``after``/``source``, a tombstone after each delete, and a primary key
change as a delete, its tombstone and a create. A Python model of the source table is the truth the
mirror is compared with after every committed batch, row for row, with each row's provenance.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyiceberg.expressions import EqualTo

from airflow_kafka_offsets.core.model import BatchState, PipelineSpec
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import MergeOperationRefusedError, SchemaEvolutionError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service import faults
from airflow_kafka_offsets.service.operations.change_spec import change_spec
from airflow_kafka_offsets.service.operations.replay import replay_batch
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from faults_harness import lake_readers

from .helpers import refused
from .pipeline import commit, commit_dies_at, operation_context, plan, read, run_once, sink_of, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

ROW = "id INT, name STRING, qty BIGINT"
COLUMNS = ("id", "name", "qty")
FIELD_TYPES = {"id": "int32", "name": "string", "qty": "int64"}


@dataclass
class Source:
    """A source table and the Debezium events its changes make (key: ``id``), produced to ``topic``.

    ``rows`` is the table now; ``expected`` each live row with the provenance its last event gives it."""

    bootstrap: str
    topic: str
    with_schema: bool = False
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    expected: dict[int, dict[str, Any]] = field(default_factory=dict)
    lsn: int = 1000
    pending: list[tuple[int, bytes, bytes | None, dict[str, Any] | None]] = field(default_factory=list)

    def _wrap(self, payload: dict[str, Any], kind: str) -> bytes:
        if not self.with_schema:
            return json.dumps(payload).encode()
        fields = [{"type": FIELD_TYPES[c], "optional": c != "id", "field": c} for c in COLUMNS]
        schema = {"type": "struct", "name": f"dbz.public.src.{kind}", "optional": False, "fields": fields}
        return json.dumps({"schema": schema, "payload": payload}).encode()

    def _event(self, op: str, key: int, before: dict | None, after: dict | None) -> None:
        self.lsn += 8
        source = {"version": "3.6.1.Final", "connector": "postgresql", "name": "dbz", "db": "src"}
        source |= {"schema": "public", "table": "src", "lsn": self.lsn, "ts_ms": self.lsn * 10}
        value = {"before": before, "after": after, "source": source, "op": op, "ts_ms": self.lsn * 10 + 1}
        record_key = self._wrap({"id": key}, "Key")
        self.pending.append((key, record_key, self._wrap(value, "Envelope"), after and {"op": op, "lsn": self.lsn}))
        if op == "d":
            self.pending.append((key, record_key, None, None))  # Debezium's tombstone after a delete

    def insert(self, id_: int, name: str, qty: int) -> None:
        self.rows[id_] = {"id": id_, "name": name, "qty": qty}
        self._event("c", id_, None, dict(self.rows[id_]))

    def update(self, id_: int, **values: Any) -> None:
        before = dict(self.rows[id_])
        self.rows[id_] |= values
        self._event("u", id_, before, dict(self.rows[id_]))

    def delete(self, id_: int) -> None:
        del self.rows[id_]
        self._event("d", id_, {"id": id_, "name": None, "qty": None}, None)  # REPLICA IDENTITY DEFAULT

    def change_key(self, old: int, new: int) -> None:
        """A primary key update: Debezium emits a delete of the old key (and its tombstone), a create of the new."""
        row = self.rows.pop(old)
        self._event("d", old, {"id": old, "name": None, "qty": None}, None)
        self.rows[new] = {**row, "id": new}
        self._event("c", new, None, dict(self.rows[new]))

    def flush(self) -> None:
        """Produce the pending events in order (one key's events in one partition, as Debezium's producer does)."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        delivered: list[tuple[int, int, int, dict | None]] = []
        for key, record_key, value, put in self.pending:
            producer.produce(
                self.topic,
                key=record_key,
                value=value,
                on_delivery=lambda err, msg, k=key, p=put: delivered.append((k, msg.partition(), msg.offset(), p)),
            )
            producer.poll(0)
        assert producer.flush(30) == 0
        assert len(delivered) == len(self.pending)
        for key, partition, offset, put in delivered:  # in produce order per partition: a key's last put wins
            if put is not None and key in self.rows:
                self.expected[key] = {
                    **self.rows[key],
                    "_kafka_partition": partition,
                    "_kafka_offset": offset,
                    "_source_position": str(put["lsn"]),
                    "_source_ts_ms": put["lsn"] * 10,
                    "_op": put["op"],
                }
        self.expected = {k: v for k, v in self.expected.items() if k in self.rows}
        self.pending.clear()


def mirror_spec(name: str, topic: str, root: str, **sink: Any) -> PipelineSpec:
    json_schema = sink.pop("json_schema", ROW)
    options = {"format": "iceberg", "table": f"lake.{name}", "merge_key": "id", **sink}
    return build_spec(name, [topic], root, json_schema=json_schema, sink=options)


def mirror(stack, ledger: Ledger, spec: PipelineSpec) -> dict[int, dict[str, Any]]:
    table = lake_readers.read_table(stack.pg_url(), ledger.schema, spec)
    rows = table.to_pylist()
    by_key = {r["id"]: r for r in rows}
    assert len(by_key) == len(rows), f"a key holds two rows: {sorted(r['id'] for r in rows)}"
    return by_key


def snapshots(stack, ledger: Ledger, spec: PipelineSpec) -> list[Any]:
    return list(lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).snapshots())


def test_debezium_changes_mirror_the_source_after_every_batch_through_a_crash_and_a_maintenance_commit(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=2)
    spec = mirror_spec("mirror_dbz", topic, str(tmp_path / "lake"))
    source = Source(stack.bootstrap_servers, topic)

    # batch 1: a snapshot's worth of inserts, an update and a delete of rows inserted in the same batch
    for i in range(1, 11):
        source.insert(i, f"n{i}", i)
    source.update(3, qty=33)
    source.insert(11, "gone", 0)
    source.delete(11)
    source.flush()
    assert run_once(ledger, spec, stack).records == 14  # with the tombstone after the delete
    assert mirror(stack, ledger, spec) == source.expected
    assert len(source.expected) == 10

    # batch 2 (the embedded-schema form): new keys in a range of their own, a delete then re-insert of one key,
    # a primary key change, a delete; its commit dies between the table's commit and the ledger's first
    source.with_schema = True
    for i in range(100, 111):
        source.insert(i, f"m{i}", i)
    source.delete(5)
    source.insert(5, "back", 55)
    source.change_key(7, 70)
    source.delete(9)
    source.flush()
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    before = mirror(stack, ledger, spec)
    commit_dies_at(ledger, spec, outcome.plan.batch_id, "after_publish")
    assert ledger.batch(spec.name, outcome.plan.batch_id).state is BatchState.PLANNED
    assert mirror(stack, ledger, spec) == before  # the merge moved with the ledger's transaction: not at all
    done = commit(ledger, spec, outcome.plan.batch_id)
    assert done.committed_now
    assert mirror(stack, ledger, spec) == source.expected
    assert {5, 70, 100, 110} <= set(source.expected) and not {7, 9} & set(source.expected)

    # batch 3: a change to one key rewrites only the data file that holds it (keys 100-110 are a file of their
    # own). Another writer, whose base was read before, commits while the merge holds the table's catalog
    # row: it waits, finds the table moved and redoes its commit on the merged state (PyIceberg retries an
    # append), so neither commit is lost and neither is applied on the state the other replaced
    source.update(105, qty=0)
    source.flush()
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    batch = outcome.plan.batch_id
    stale = lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec)
    extra = stale.scan(limit=1).to_arrow()
    extra = extra.set_column(0, "id", pa.array([999], pa.int32()))
    writer = threading.Thread(target=stale.append, args=(extra,))

    def start_other_writer(point: str) -> None:
        if point == "after_publish":  # the merge is in the table's locked catalog row, not committed yet
            writer.start()
            writer.join(2)
            assert writer.is_alive()

    faults._observers.append(start_other_writer)
    try:
        commit(ledger, spec, batch)
    finally:
        faults._observers.remove(start_other_writer)
    writer.join(120)
    history = snapshots(stack, ledger, spec)
    merged_last = [s for s in history if s.summary.additional_properties.get("kafka-offsets.batch") == str(batch)][-1]
    assert history[-1].parent_snapshot_id == merged_last.snapshot_id  # the other writer's commit, on the merge
    assert mirror(stack, ledger, spec) == {**source.expected, 999: extra.to_pylist()[0]}
    lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).delete(EqualTo("id", 999))
    assert mirror(stack, ledger, spec) == source.expected
    files_now = len(lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).scan().plan_files())
    merged = [
        s.summary
        for s in snapshots(stack, ledger, spec)
        if s.summary.additional_properties.get("kafka-offsets.batch") == str(batch)
    ]
    assert sum(int(s.additional_properties.get("deleted-data-files", 0)) for s in merged) == 1 < files_now
    assert mirror(stack, ledger, spec) == source.expected

    # batch 4: a maintenance job compacts the table after Spark ran, before the commit
    source.with_schema = False
    source.update(105, name="changed")
    source.delete(1)
    source.flush()
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    table = lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec)
    table.overwrite(table.scan().to_arrow(), snapshot_properties={"maintenance": "compaction"})  # same rows
    assert len(table.refresh().scan().plan_files()) == 1 < files_now
    commit(ledger, spec, outcome.plan.batch_id)
    assert mirror(stack, ledger, spec) == source.expected  # merged on the compacted state, not the stale one
    history = snapshots(stack, ledger, spec)
    compaction = [s for s in history if s.summary.additional_properties.get("maintenance") == "compaction"][-1]
    merged = [s for s in history if s.summary.additional_properties.get("kafka-offsets.batch") == str(batch + 1)]
    assert merged and merged[0].parent_snapshot_id == compaction.snapshot_id  # built on it, not beside it


def test_random_workload_equals_the_source_the_latest_batch_replays_older_ones_and_rewinds_are_refused(
    stack, ledger, make_topic, tmp_path
):
    """Many keys changed many times per batch (last change wins across 3 partitions), two batches."""
    topic = make_topic(partitions=3)
    spec = mirror_spec("mirror_random", topic, str(tmp_path / "lake"))
    source = Source(stack.bootstrap_servers, topic)
    rng = random.Random(37)
    next_id = 1
    for wave in range(2):
        for _ in range(400):
            roll = rng.random()
            if not source.rows or roll < 0.35:
                source.insert(next_id, f"r{next_id}", rng.randrange(100))
                next_id += 1
            elif roll < 0.7:
                source.update(rng.choice(sorted(source.rows)), qty=rng.randrange(100), name=f"w{wave}")
            elif roll < 0.85:
                source.delete(rng.choice(sorted(source.rows)))
            else:
                source.change_key(rng.choice(sorted(source.rows)), next_id)
                next_id += 1
        source.flush()
        source.with_schema = not source.with_schema  # both forms; a key's events share a form in a batch
        assert run_once(ledger, spec, stack) is not None
        assert mirror(stack, ledger, spec) == source.expected
    assert len(source.expected) > 50

    ctx = operation_context(ledger, stack, submitter(stack))
    with refused(MergeOperationRefusedError, r"only the latest batch \(2\) replays"):
        replay_batch(ctx, spec.name, 1)
    files_before = {
        t.file.file_path for t in lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec).scan().plan_files()
    }
    replay_batch(ctx, spec.name, 2)  # merged again on the state batch 1 left: the same rows
    assert mirror(stack, ledger, spec) == source.expected
    replayed = lake_readers.iceberg_table(stack.pg_url(), ledger.schema, spec)
    assert {t.file.file_path for t in replayed.scan().plan_files()} != files_before  # rewritten, not left alone
    assert [c["kafka-offsets.operation"] for c in lake_readers.table_commits(stack.pg_url(), ledger.schema, spec)][
        -1
    ] == "replay"
    with refused(MergeOperationRefusedError, "only skip forward"):
        reset_offsets(operation_context(ledger, stack), spec.name, ResetRequest(ResetMode.TO_EARLIEST), dry_run=False)
    assert mirror(stack, ledger, spec) == source.expected


def test_upsert_changes_and_the_mirror_schema_evolves_only_by_nullable_columns(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    root = str(tmp_path / "lake")

    def upsert_spec(json_schema: str) -> PipelineSpec:
        return mirror_spec(
            "mirror_upsert", topic, root, changes="upsert", merge_key="tenant,id", json_schema=json_schema
        )

    spec = upsert_spec("tenant STRING, id INT, v STRING")
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    events = [
        ({"tenant": "a", "id": 1}, {"tenant": "a", "id": 1, "v": "one"}),
        ({"tenant": "b", "id": 1}, {"tenant": "b", "id": 1, "v": "other tenant"}),
        ({"tenant": "a", "id": 2}, {"tenant": "a", "id": 2, "v": "two"}),
        ({"tenant": "a", "id": 1}, {"tenant": "a", "id": 1, "v": "one again"}),
        ({"tenant": "a", "id": 2}, None),  # tombstone
    ]
    for key, value in events:
        producer.produce(topic, key=json.dumps(key), value=None if value is None else json.dumps(value))
    assert producer.flush(30) == 0
    run_once(ledger, spec, stack)
    table = lake_readers.read_table(stack.pg_url(), ledger.schema, spec)
    got = sorted((r["tenant"], r["id"], r["v"], r["_kafka_offset"], r["_op"]) for r in table.to_pylist())
    assert got == [("a", 1, "one again", 3, "u"), ("b", 1, "other tenant", 1, "u")]

    wider = upsert_spec("tenant STRING, id INT, v STRING, added BIGINT")
    assert change_spec(operation_context(ledger, stack), spec.name, wider, dry_run=False).applied
    sink_of(ledger, wider).check_writable(wider.decode)  # as the next plan does
    assert lake_readers.read_table(stack.pg_url(), ledger.schema, wider).schema.names == [
        "tenant",
        "id",
        "v",
        "_kafka_partition",
        "_kafka_offset",
        "_source_position",
        "_source_ts_ms",
        "_op",
        "added",
    ]
    for dropped, message in (
        ("tenant STRING, id INT, added BIGINT", "v would be dropped"),
        ("tenant STRING, id INT, v BIGINT, added BIGINT", "v would change from"),
    ):
        narrower = upsert_spec(dropped)
        with refused(SchemaEvolutionError, message):
            sink_of(ledger, narrower).check_writable(narrower.decode)
    producer.produce(
        topic,
        key=json.dumps({"tenant": "b", "id": 1}),
        value=json.dumps({"tenant": "b", "id": 1, "v": "w", "added": 7}),
    )
    assert producer.flush(30) == 0
    run_once(ledger, wider, stack)
    rows = {
        (r["tenant"], r["id"]): r for r in lake_readers.read_table(stack.pg_url(), ledger.schema, wider).to_pylist()
    }
    assert (rows[("b", 1)]["v"], rows[("b", 1)]["added"]) == ("w", 7)
    assert (rows[("a", 1)]["v"], rows[("a", 1)]["added"]) == ("one again", None)
