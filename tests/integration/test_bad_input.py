"""Awkward records are kept exactly as Kafka holds them: nothing dropped, nothing altered."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from airflow_kafka_offsets.model import TopicPartition as TP
from airflow_kafka_offsets.ranges import build_spec

from .helpers import committed_rows
from .pipeline import run_once

BIG = 3 * 1024 * 1024


def test_raw_bytes_survive_nulls_tombstones_big_records_bad_utf8_and_repeated_headers(stack, ledger, make_topic,
                                                                                       tmp_path):
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
