"""Exactly-once on the real stack: transactions, compaction, new partitions, retention,
and a crash between Spark and the commit. Every test checks exact ids, offsets and ledger rows."""

from __future__ import annotations

import time
import uuid

import psycopg2
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTP

from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import DataLossError, NoStartingOffsetError, OutputLocationError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.change_spec import change_spec
from airflow_kafka_offsets.sinks import LocalDirectorySink

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, local_path, produce
from .pipeline import commit, operation_context, plan, read, run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


def test_transactional_producer_aborted_records_never_reach_the_output(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    committed, aborted = [], []
    for txn in range(6):
        producer.begin_transaction()
        ids = [f"txn{txn}-{i}-{uuid.uuid4().hex[:6]}" for i in range(40)]
        for i, rid in enumerate(ids):
            producer.produce(topic, key=rid.encode(), value=rid.encode(), partition=i % 2)
        assert producer.flush(30) == 0  # aborted records really reach the log before the abort marker
        if txn % 2:
            producer.abort_transaction(30)
            aborted += ids
        else:
            producer.commit_transaction(30)
            committed += ids
    spec = build_spec("txn", [topic], str(tmp_path))
    outcome = run_once(ledger, spec, stack)
    keys = [r["key"].decode() for r in committed_rows(ledger, "txn")]
    assert sorted(keys) == sorted(committed)
    assert not set(keys) & set(aborted)
    # the range spans the aborted records and the markers: fewer records than offsets
    ranges = ledger_ranges(ledger, "txn")
    assert [(r[3], r[5], r[6], r[7]) for r in ranges] == [(0, 0, 126, 60), (1, 0, 126, 60)]
    assert outcome.records == 120


def wait_for_compaction(bootstrap: str, topic: str, end: int, timeout_s: float = 90) -> list[int]:
    """Offsets a consumer sees in [0, end) once the cleaner has removed superseded records."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": uuid.uuid4().hex,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        consumer.assign([KafkaTP(topic, 0, 0)])
        offsets: list[int] = []
        while True:
            msg = consumer.poll(5)
            if msg is None or msg.error():
                break
            offsets.append(msg.offset())
        consumer.close()
        if len(offsets) < end:
            return offsets
        time.sleep(2)
    raise AssertionError(f"the log cleaner did not compact {topic} within {timeout_s}s")


def test_compacted_topic_with_offset_gaps(stack, ledger, make_topic, tmp_path):
    topic = make_topic(
        partitions=1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.001",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "0",
        },
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    at_offset: dict[int, tuple[bytes, bytes]] = {}

    def delivered(err, msg):
        assert err is None
        at_offset[msg.offset()] = (msg.key(), msg.value())

    for wave in range(5):
        for key in range(20):
            producer.produce(topic, key=f"k{key}".encode(), value=f"{wave}".encode(), on_delivery=delivered)
        producer.flush(30)
        time.sleep(0.3)  # let segments roll so older ones can be cleaned
    producer.produce(topic, key=b"roll", value=b"x", on_delivery=delivered)
    producer.flush(30)
    wait_for_compaction(stack.bootstrap_servers, topic, end=101)
    spec = build_spec("compacted", [topic], str(tmp_path))
    outcome = run_once(ledger, spec, stack)
    rows = committed_rows(ledger, "compacted")
    offsets = [r["offset"] for r in rows]
    # gaps, but no false data-loss alarm: fewer records than offsets, each the record produced there
    assert outcome.records == len(rows) == len(set(offsets)) < 101
    assert all(at_offset[r["offset"]] == (r["key"], r["value"]) for r in rows)
    latest = {key: value for _, (key, value) in sorted(at_offset.items())}
    assert {r["key"]: r["value"] for r in rows if latest[r["key"]] == r["value"]} == latest
    assert ledger.cursors("compacted") == {TP(topic, 0): 101}


def test_partition_added_between_runs_starts_at_earliest(stack, ledger, make_topic, add_partitions, tmp_path):
    topic = make_topic(partitions=2)
    produced = produce(stack.bootstrap_servers, topic, 40, partitions=2)
    spec = build_spec("grow", [topic], str(tmp_path))
    run_once(ledger, spec, stack)
    add_partitions(topic, 3)
    produced += produce(stack.bootstrap_servers, topic, 30, partitions=3)
    run_once(ledger, spec, stack)
    assert_exactly_once(committed_rows(ledger, "grow"), produced)
    assert ledger.cursors("grow") == {TP(topic, 0): 30, TP(topic, 1): 30, TP(topic, 2): 10}
    assert [(r[0], r[3], r[4], r[5], r[6]) for r in ledger_ranges(ledger, "grow")] == [
        (1, 0, 0, 0, 20),
        (1, 1, 0, 0, 20),
        (2, 0, 20, 20, 30),
        (2, 1, 20, 20, 30),
        (2, 2, 0, 0, 10),
    ]


def test_partition_added_with_error_policy_fails_and_changes_nothing(
    stack, ledger, make_topic, add_partitions, tmp_path
):
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 5, partitions=1)
    spec = build_spec("strict", [topic], str(tmp_path), new_partition_offsets="error")
    run_once(ledger, spec, stack)
    add_partitions(topic, 2)
    with pytest.raises(NoStartingOffsetError, match=f"{topic}-1"):
        plan(ledger, spec, stack)
    assert ledger.cursors("strict") == {TP(topic, 0): 5}
    assert len(ledger.committed_batches("strict")) == 1


def test_retention_below_cursor_fails_loudly_then_skip_records_the_gap(
    stack, ledger, make_topic, kafka_admin, tmp_path
):
    topic = make_topic(partitions=1)
    first = produce(stack.bootstrap_servers, topic, 100, partitions=1)
    spec = build_spec("lossy", [topic], str(tmp_path))
    run_once(ledger, spec, stack)
    more = produce(stack.bootstrap_servers, topic, 100, partitions=1)
    kafka_admin.delete_records([KafkaTP(topic, 0, 150)])[KafkaTP(topic, 0, 150)].result(timeout=30)
    with pytest.raises(DataLossError, match=rf"{topic}-0 offsets \[100, 150\) \(50 records\)"):
        plan(ledger, spec, stack)
    assert ledger.cursors("lossy") == {TP(topic, 0): 100}
    assert [b.plan.batch_id for b in ledger.committed_batches("lossy")] == [1]
    with ledger.transaction() as tx:
        assert tx.planned_batch_id("lossy") is None
    # opting in to skipping (a spec change made on purpose): the lost span is recorded in the batch that skips it
    skipping = build_spec("lossy", [topic], str(tmp_path), on_data_loss="skip")
    assert change_spec(operation_context(ledger, stack), "lossy", skipping, dry_run=False).applied
    run_once(ledger, skipping, stack)
    assert [(r[0], r[4], r[5], r[6]) for r in ledger_ranges(ledger, "lossy")] == [(1, 0, 0, 100), (2, 100, 150, 200)]
    assert_exactly_once(committed_rows(ledger, "lossy"), first + [p for p in more if p["offset"] >= 150])
    assert ledger.contiguity_problems("lossy") == []


def test_crash_after_spark_before_commit_replays_the_same_batch(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, 300, partitions=3)
    spec = build_spec("crash", [topic], str(tmp_path))
    first = plan(ledger, spec, stack)
    report = read(ledger, spec, stack, first)
    assert report is not None
    # the worker died after Spark and even after publishing, but before the ledger commit
    sink = LocalDirectorySink(str(tmp_path))
    with ledger.transaction() as tx:
        staged = tx.latest_succeeded_attempt("crash", first.plan.batch_id).staging_uri
    sink.publish_directory(staged, first.plan.output_uri)
    assert ledger.batch("crash", 1).state is BatchState.PLANNED
    produced_later = produce(stack.bootstrap_servers, topic, 30, partitions=3)
    # the retry (or the next run) replays the same plan, not a new one covering the newer records
    again = plan(ledger, spec, stack)
    assert again.replayed and again.plan == first.plan
    read(ledger, spec, stack, again)
    assert commit(ledger, spec, 1).records == 300
    assert not commit(ledger, spec, 1).committed_now
    assert_exactly_once(committed_rows(ledger, "crash"), produced)
    run_once(ledger, spec, stack)
    assert_exactly_once(committed_rows(ledger, "crash"), produced + produced_later)
    assert ledger.contiguity_problems("crash") == []
    assert not (local_path(first.plan.output_uri).parent.parent / "_staging" / "crash" / "batch=000000000001").exists()


def test_an_output_left_by_another_ledger_is_refused_at_commit_and_kept(stack, ledger, make_topic, tmp_path):
    """A ledger created again (or a second one) over the same output root finds its batch 1's location
    holding the other ledger's batch 1. Taking it for its own published attempt would commit the
    other records as these; the commit refuses, changes nothing, and goes through once it is moved."""
    topic = make_topic(partitions=2)
    spec = build_spec("reused_root", [topic], str(tmp_path))
    earlier = produce(stack.bootstrap_servers, topic, 40, partitions=2)
    first = run_once(ledger, spec, stack)
    assert first is not None and first.plan.batch_id == 1
    output = local_path(first.plan.output_uri)
    files_before = sorted((p.name, p.stat().st_mtime_ns) for p in output.iterdir())

    again = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=f"t_{uuid.uuid4().hex[:12]}")
    again.migrate()
    later = produce(stack.bootstrap_servers, topic, 30, partitions=2)
    outcome = plan(again, spec, stack)
    read(again, spec, stack, outcome)
    with pytest.raises(
        OutputLocationError,
        match=r"batch 1 of pipeline 'reused_root': its output location .*"
        r"batch=000000000001 already holds attempt \w+, which this ledger never ran",
    ):
        commit(again, spec, 1)
    assert again.batch("reused_root", 1).state is BatchState.PLANNED
    assert again.cursors("reused_root") == {TP(topic, 0): 0, TP(topic, 1): 0}
    assert sorted((p.name, p.stat().st_mtime_ns) for p in output.iterdir()) == files_before
    assert_exactly_once(committed_rows(ledger, "reused_root"), earlier)

    output.rename(tmp_path / "moved-away")
    assert commit(again, spec, 1).records == 70
    assert_exactly_once(committed_rows(again, "reused_root"), earlier + later)
    assert again.cursors("reused_root") == {TP(topic, 0): 35, TP(topic, 1): 35}
