"""The generated data set: JSON records of about ``record_bytes`` bytes, round-robin over partitions.

Produced once per run into a fresh topic; produce time is reported but is not part of any figure.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.common import now, say

COUNTRIES = ["DE", "FR", "NL", "US", "BR", "JP", "IN", "ZA", "SE", "PL"]
EVENTS = ["view", "click", "add_to_cart", "checkout", "refund", "search"]


@dataclass(frozen=True)
class DataSet:
    topic: str
    partitions: int
    records: int
    payload_bytes: int  # sum of key + value lengths, the MB in MB/s
    produce_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def create_topic(bootstrap: str, partitions: int, prefix: str = "bench") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=60)
    return name


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(timeout=60)
    except Exception as exc:  # best effort: the stack is throwaway
        say(f"could not delete topic {topic}: {exc}")


def random_filler(random_bytes: int, length: int) -> str:
    """``length`` hex digits of ``random_bytes`` random bytes: text that compresses like real event data."""
    return os.urandom(random_bytes).hex()[:length]


def send(bootstrap: str, topic: str, partitions: int, records: Iterable[tuple[bytes, bytes]]) -> int:
    """Produce (key, value) records round-robin over the partitions, all delivered; their key + value bytes."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
            "enable.idempotence": True,
        }
    )
    payload = 0
    for i, (key, value) in enumerate(records):
        payload += len(key) + len(value)
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"{left} records were not delivered to {topic}")
    return payload


def _record(i: int, filler: str) -> tuple[bytes, bytes]:
    key = f"k{i:012d}"
    body = {
        "id": key,
        "seq": i,
        "ts": 1_700_000_000_000 + i * 7,
        "user_id": (i * 2654435761) % 1_000_003,
        "country": COUNTRIES[i % len(COUNTRIES)],
        "event": EVENTS[(i // 7) % len(EVENTS)],
        "amount": round(((i * 37) % 100_000) / 100, 2),
        "session": uuid.UUID(int=(i * 0x9E3779B97F4A7C15) & ((1 << 128) - 1)).hex,
        "note": filler,
    }
    return key.encode(), json.dumps(body, separators=(",", ":")).encode()


def produce(
    bootstrap: str, records: int, partitions: int, record_bytes: int = 500, topic: str | None = None
) -> DataSet:
    """Create a topic (or use ``topic``, which already has ``partitions``) and fill it; values are JSON
    of about ``record_bytes`` bytes, partly random."""
    from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient

    def stored(topic: str) -> int:
        offsets = KafkaOffsetsClient({"bootstrap.servers": bootstrap}).offsets([topic])
        return sum(o.latest - o.earliest for o in offsets.values())

    before = 0
    if topic is None:
        topic = create_topic(bootstrap, partitions)
    else:
        before = stored(topic)
    base_key, base_value = _record(0, "")
    filler_len = max(record_bytes - len(base_value) - len(base_key) - 4, 0)
    say(f"producing {records:,} records of ~{record_bytes} B into {topic} ({partitions} partitions)")
    started = now()
    half = filler_len // 2 + 1
    # A random hex filler (half the entropy of its bytes), different in every record, so Parquet
    # compresses values about as well as real event JSON, not 10:1.
    payload = send(
        bootstrap, topic, partitions, (_record(i, random_filler(half, filler_len - (i % 17))) for i in range(records))
    )
    elapsed = now() - started
    added = stored(topic) - before
    if added != records:
        raise RuntimeError(f"{topic} gained {added} records, {records} were produced")
    say(f"produced {records:,} records ({payload / 1e6:,.0f} MB) in {elapsed:.1f}s")
    return DataSet(topic, partitions, records, payload, round(elapsed, 3))
