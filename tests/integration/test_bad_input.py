"""Awkward records are kept exactly as Kafka holds them: nothing dropped, nothing altered."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import DecodeErrorThresholdError

from .helpers import committed_rows, local_path
from .pipeline import plan, read, run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

BIG = 3 * 1024 * 1024


def test_raw_bytes_survive_nulls_tombstones_big_records_bad_utf8_and_repeated_headers(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1, config={"max.message.bytes": str(8 * 1024 * 1024)})
    big_value = os.urandom(BIG)
    records = [
        (None, b'{"id": 1}', None),  # null key
        (b"tombstone", None, None),  # null value: a tombstone
        (b"", b"", None),  # empty key and value
        (b"big", big_value, None),  # several MB
        (b"\xff\xfe\xfa", b"\xc3\x28 not utf-8 \x80", None),  # invalid UTF-8
        (b"hdr", b"v", [("h", b"1"), ("h", b"2"), ("h", None), ("", b"")]),  # repeated and odd headers
        (b"json-bad", b'{"id": ', None),  # malformed JSON is still just bytes
    ]
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "message.max.bytes": 8 * 1024 * 1024})
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0)
    assert producer.flush(60) == 0
    spec = build_spec("bad_input", [topic], str(tmp_path))
    outcome = run_once(ledger, spec, stack)
    assert outcome.records == len(records)
    rows = sorted(committed_rows(ledger, "bad_input"), key=lambda r: r["offset"])
    assert [r["offset"] for r in rows] == list(range(len(records)))
    for row, (key, value, headers) in zip(rows, records):
        assert row["key"] == key
        assert row["value"] == value
        assert row["headers"] == ([{"key": k, "value": v} for k, v in headers] if headers else None)
    assert ledger.cursors("bad_input") == {TP(topic, 0): len(records)}
    with ledger.transaction() as tx:
        payload = tx.fetchone("SELECT payload_bytes FROM {s}.batch_ranges WHERE pipeline = 'bad_input'")[0]
    assert payload == sum(len(k or b"") + len(v or b"") for k, v, _ in records)


JSON_RECORDS = [
    (b"a", b'{"id": "a", "n": 1}', None),
    (b"b", b'{"id": "b", "n": ', "value does not match the JSON schema"),  # truncated JSON
    (b"c", b"\xff\xfe{}", "value is not valid UTF-8"),
    (b"d", None, None),  # tombstone: nothing to decode, not an error
    (b"e", b'{"id": "e", "n": "not a number"}', "value does not match the JSON schema"),
    (b"f", b'{"id": "f", "n": 6, "extra": true}', None),
]


def produce_json_records(stack, topic):
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    for key, value, _ in JSON_RECORDS:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0


def test_json_decode_keeps_raw_bytes_and_lists_failures_with_offsets(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    produce_json_records(stack, topic)
    spec = build_spec("decoded", [topic], str(tmp_path), json_schema="id STRING, n INT")
    outcome = run_once(ledger, spec, stack)
    assert outcome.records == len(JSON_RECORDS)
    rows = sorted(committed_rows(ledger, "decoded"), key=lambda r: r["offset"])
    for row, (key, value, error) in zip(rows, JSON_RECORDS):
        assert (row["key"], row["value"], row["decode_error"]) == (key, value, error)
    assert rows[0]["decoded"] == {"id": "a", "n": 1} and rows[5]["decoded"] == {"id": "f", "n": 6}
    assert rows[1]["decoded"] is None and rows[3]["decoded"] is None
    errors = pq.read_table(local_path(outcome.plan.output_uri) / "_errors").to_pylist()
    assert sorted((e["offset"], e["key"], e["decode_error"]) for e in errors) == [
        (i, k, e) for i, (k, _, e) in enumerate(JSON_RECORDS) if e
    ]
    with ledger.transaction() as tx:
        assert tx.fetchone("SELECT decode_errors FROM {s}.batch_ranges WHERE pipeline = 'decoded'")[0] == 3


def test_decode_error_threshold_fails_the_batch_and_commits_nothing(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    produce_json_records(stack, topic)
    spec = build_spec("strict_json", [topic], str(tmp_path), json_schema="id STRING, n INT", max_decode_errors=2)
    outcome = plan(ledger, spec, stack)
    with pytest.raises(DecodeErrorThresholdError, match=r"3 records could not be decoded as JSON \(.*-0: 3\)"):
        read(ledger, spec, stack, outcome)
    assert ledger.batch("strict_json", 1).state is BatchState.PLANNED
    assert ledger.cursors("strict_json") == {TP(topic, 0): 0}
    assert not local_path(outcome.plan.output_uri).exists()
