"""Waves of records produced to a trial's topic and acknowledged one by one: records with unique ids,
or (mirror tables) changes to keyed rows: upserts and tombstones."""

from __future__ import annotations

import json
import random
import uuid
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, Message, Producer

from faults_harness.avro_values import AvroValues
from faults_harness.context import PARTITIONS, ROUTED_TABLES, TrialError


class Outgoing(NamedTuple):
    """One record to produce; ``rid`` names it in the acknowledgment (the id a reader must find)."""

    rid: str
    key: bytes
    value: bytes | None
    partition: int
    headers: list[tuple[str, str | bytes | None]]


def _produce(bootstrap_servers: str, topic: str, records: Sequence[Outgoing]) -> list[dict[str, Any]]:
    """Produce ``records`` idempotently; each acknowledged one's id, partition and offset, in order."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "linger.ms": 5})
    acked: list[dict[str, Any]] = []
    errors: list[str] = []

    def delivered(rid: str) -> Any:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked.append({"id": rid, "partition": msg.partition(), "offset": msg.offset()})

        return on_delivery

    for record in records:
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            partition=record.partition,
            headers=record.headers,
            on_delivery=delivered(record.rid),
        )
        producer.poll(0)
    if producer.flush(120) or errors or len(acked) != len(records):
        raise TrialError(f"producing to {topic} failed: {len(acked)} of {len(records)} acknowledged {errors[:3]}")
    return acked


def produce_wave(
    bootstrap_servers: str, topic: str, count: int, tag: str, avro: AvroValues | None
) -> list[dict[str, Any]]:
    """``count`` records round-robin over the partitions (Avro: plus one corrupted record per partition);
    returns each acknowledged record's id, partition and offset (Avro: its expected fields or error)."""
    expect: dict[str, dict[str, Any]] = {}  # Avro: each id's decoded fields or decode_error
    records = []
    for i in range(count + (PARTITIONS if avro else 0)):
        rid = f"{tag}{uuid.uuid4().hex}"
        value = json.dumps({"id": rid, "n": i}).encode()
        if avro is not None:
            made = avro.good(rid, i) if i < count else avro.corrupted(rid)
            value, expect[rid] = made.value, {"decoded": made.decoded, "error": made.error}
        records.append(
            Outgoing(rid, rid.encode(), value, i % PARTITIONS, [("table", f"t{i % ROUTED_TABLES}".encode())])
        )
    acked = _produce(bootstrap_servers, topic, records)
    for record in acked:
        record.update(expect.get(record["id"], {}))
    return acked


def produce_changes(
    bootstrap_servers: str, topic: str, count: int, tag: str, live: Sequence[str], rng: random.Random
) -> list[dict[str, Any]]:
    """``count`` changes to rows keyed ``id`` (the record key ``{"id": ...}``, each key always on the same
    partition): new rows, new values of live rows (``live``) or of rows changed earlier in the wave, and
    tombstones that delete them. Each acknowledgment carries its ``n`` (None: a tombstone)."""
    live = list(live)
    records, values = [], {}
    for i in range(count):
        draw = rng.random()
        if live and draw < 0.15:
            rid, n = live.pop(rng.randrange(len(live))), None  # delete
        elif live and draw < 0.5:
            rid, n = rng.choice(live), i  # a new value of a live row
        else:
            rid, n = f"{tag}{uuid.uuid4().hex[:12]}", i
            live.append(rid)
        value = None if n is None else json.dumps({"id": rid, "n": n}).encode()
        partition = zlib.crc32(rid.encode()) % PARTITIONS
        records.append(Outgoing(f"{rid}#{i}", json.dumps({"id": rid}).encode(), value, partition, []))
        values[f"{rid}#{i}"] = n
    acked = _produce(bootstrap_servers, topic, records)
    for record in acked:
        record["n"] = values[record["id"]]
        record["id"] = record["id"].rsplit("#", 1)[0]
    return acked


def mirror_state(produced: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a mirror of ``produced`` changes holds: each key's last change by Kafka order (a key's changes
    share a partition), less the deleted keys."""
    last: dict[str, dict[str, Any]] = {}
    for change in sorted(produced, key=lambda c: (c["partition"], c["offset"])):
        last[change["id"]] = change
    return {rid: change for rid, change in last.items() if change["n"] is not None}
