"""A source table's changes as Debezium's PostgreSQL connector writes them to Kafka, and the mirror tables
(merge mode) they land in: shared by the Iceberg and the Delta mirror tests.

The events follow Debezium's JSON (with and without the embedded schema): ``c``/``u``/``d`` with
``before``/``after``/``source``, a tombstone after each delete, and a primary key change as a delete, its
tombstone and a create. :class:`Source` keeps a Python model of the source table, the truth a mirror is
compared with after every committed batch, row for row, with each row's provenance.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from airflow_kafka_offsets.core.model import PipelineSpec
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from faults_harness import lake_readers

from .pipeline import run_once

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
    next_id: int = 1  # the key a random insert takes

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

    def random_wave(self, rng: random.Random, changes: int, label: str) -> None:
        """``changes`` random inserts, updates (naming the row ``label``), deletes and key changes, produced;
        the next wave switches the form (with or without the schema: a key's events share one in a batch)."""
        for _ in range(changes):
            roll = rng.random()
            if not self.rows or roll < 0.35:
                self.insert(self.next_id, f"r{self.next_id}", rng.randrange(100))
                self.next_id += 1
            elif roll < 0.7:
                self.update(rng.choice(sorted(self.rows)), qty=rng.randrange(100), name=label)
            elif roll < 0.85:
                self.delete(rng.choice(sorted(self.rows)))
            else:
                self.change_key(rng.choice(sorted(self.rows)), self.next_id)
                self.next_id += 1
        self.flush()
        self.with_schema = not self.with_schema

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


def first_changes(source: Source) -> None:
    """A mirror's first batch: ten inserts (keys 1-10), an update, and a row inserted and deleted within the
    batch: 14 records with the tombstone after the delete."""
    for i in range(1, 11):
        source.insert(i, f"n{i}", i)
    source.update(3, qty=33)
    source.insert(11, "gone", 0)
    source.delete(11)
    source.flush()


def moving_changes(source: Source, new_keys: range) -> None:
    """In the embedded-schema form: new keys in a range of their own, a delete then re-insert of key 5, a
    primary key change 7 -> 70, a delete of 9."""
    source.with_schema = True
    for i in new_keys:
        source.insert(i, f"m{i}", i)
    source.delete(5)
    source.insert(5, "back", 55)
    source.change_key(7, 70)
    source.delete(9)
    source.flush()


def two_random_batches(stack, ledger: Ledger, spec: PipelineSpec, changes: int) -> tuple[Source, random.Random]:
    """Two committed batches of ``changes`` random changes each on ``spec``'s topic (many keys changed many
    times per batch, last change wins across partitions), the mirror equal to the source after each; the
    source and the random generator, to go on with."""
    source = Source(stack.bootstrap_servers, spec.topics[0])
    rng = random.Random(37)
    for wave in range(2):
        source.random_wave(rng, changes, f"w{wave}")
        assert run_once(ledger, spec, stack) is not None
        assert mirror(stack, ledger, spec) == source.expected
    assert len(source.expected) > 50
    return source, rng


def mirror_spec(name: str, topic: str, root: str, sink_format: str = "iceberg", **sink: Any) -> PipelineSpec:
    """A mirror of ``topic`` keyed by ``id``: the Iceberg table ``lake.<name>`` or the Delta table ``<name>``."""
    json_schema = sink.pop("json_schema", ROW)
    table = f"lake.{name}" if sink_format == "iceberg" else name
    options = {"format": sink_format, "table": table, "merge_key": "id", **sink}
    return build_spec(name, [topic], root, json_schema=json_schema, sink=options)


def mirror(stack, ledger: Ledger, spec: PipelineSpec) -> dict[int, dict[str, Any]]:
    """The mirror's rows by key, as PyIceberg or delta-rs reads them (no key twice)."""
    table = lake_readers.read_table(stack.pg_url(), ledger.schema, spec)
    rows = table.to_pylist()
    by_key = {r["id"]: r for r in rows}
    assert len(by_key) == len(rows), f"a key holds two rows: {sorted(r['id'] for r in rows)}"
    return by_key
