"""Waves of records with unique ids, produced to a trial's topic and acknowledged one by one."""

from __future__ import annotations

import json
import uuid
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from faults_harness.avro_values import AvroValues
from faults_harness.context import PARTITIONS, ROUTED_TABLES, TrialError


def produce_wave(
    bootstrap_servers: str, topic: str, count: int, tag: str, avro: AvroValues | None
) -> list[dict[str, Any]]:
    """``count`` records round-robin over the partitions (Avro: plus one corrupted record per partition);
    returns each acknowledged record's id, partition and offset (Avro: its expected fields or error)."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "linger.ms": 5})
    acked: list[dict[str, Any]] = []
    errors: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        key = msg.key()
        if err is not None:
            errors.append(str(err))
        elif key is None:  # every record here has a key
            errors.append(f"record without a key acked at offset {msg.offset()}")
        else:
            acked.append({"id": key.decode(), "partition": msg.partition(), "offset": msg.offset()})

    expect: dict[str, dict[str, Any]] = {}  # Avro: each id's decoded fields or decode_error
    total = count + (PARTITIONS if avro else 0)
    for i in range(total):
        rid = f"{tag}{uuid.uuid4().hex}"
        value = json.dumps({"id": rid, "n": i}).encode()
        if avro is not None:
            made = avro.good(rid, i) if i < count else avro.corrupted(rid)
            value, expect[rid] = made.value, {"decoded": made.decoded, "error": made.error}
        producer.produce(
            topic,
            key=rid.encode(),
            value=value,
            partition=i % PARTITIONS,
            headers=[("table", f"t{i % ROUTED_TABLES}".encode())],
            on_delivery=delivered,
        )
        producer.poll(0)
    if producer.flush(120) or errors or len(acked) != total:
        raise TrialError(f"producing to {topic} failed: {len(acked)} of {total} acknowledged {errors[:3]}")
    for record in acked:
        record.update(expect.get(record["id"], {}))
    return acked
