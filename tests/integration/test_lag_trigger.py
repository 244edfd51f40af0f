"""Lag-driven scheduling on the real stack.

In-process: ``KafkaLagTrigger.run()`` against the real Kafka and ledger fires on age and on
records, holds after firing until the cursors move, and writes nothing (no ledger schema, no
consumer group). With a real triggerer: ``kafka_lag_ingest_example``'s watcher stays quiet below
100 unread records, fires once they are reached, and the run it causes ingests exactly them.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg2
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations import reset_offsets
from airflow_kafka_offsets.triggers import KafkaLagTrigger

from .pipeline import ACTOR

QUIET_S = 2.0  # ten polls of the in-process triggers


def produce_at(bootstrap: str, topic: str, per_partition: int, partitions: int, timestamp_ms: int) -> None:
    """Records with a given CreateTime, ``per_partition`` to each partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=json.dumps({"n": i}).encode(), partition=partition, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def probe_groups(admin: AdminClient) -> list[str]:
    """Consumer groups the broker knows that a lag look-up could have made."""
    groups = admin.list_consumer_groups(request_timeout=30).result().valid
    return [g.group_id for g in groups if g.group_id.startswith("airflow-kafka-offsets")]


class Events:
    """Runs a trigger in the background and collects what it yields."""

    def __init__(self, trigger: KafkaLagTrigger) -> None:
        self.trigger = trigger
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task = asyncio.create_task(self._pump(trigger.run()))

    async def _pump(self, events: AsyncIterator[Any]) -> None:
        async for event in events:
            await self.queue.put(event.payload)

    async def next(self, timeout: float) -> dict[str, Any] | None:
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            assert not self.task.done(), self.task.exception()
            return None

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.trigger.cleanup()


def test_trigger_fires_on_age_and_records_holds_until_cursors_move_and_writes_nothing(
    stack, make_topic, kafka_admin, schema
):
    topic = make_topic(partitions=2)
    pipeline = f"lag_{schema}"
    now_ms = int(time.time() * 1000)
    produce_at(stack.bootstrap_servers, topic, 3, 2, now_ms - 600_000)  # offsets 0-2: ten minutes old
    produce_at(stack.bootstrap_servers, topic, 2, 2, now_ms)  # offsets 3-4: new
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema)  # not created: no cursors yet
    common = {"pipeline": pipeline, "topics": [topic], "poll_interval": 0.2, "ledger_schema": schema}

    async def scenario() -> None:
        by_age = Events(KafkaLagTrigger(max_lag_records=1000, max_lag_age=300, **common))
        try:
            first = await by_age.next(timeout=30)
            assert first is not None
            assert 600 <= first["oldest_unread_age_s"] < 700
            assert re.fullmatch(r"oldest unread record 6\d\ds old >= max_lag_age 300s \(10 records\)", first["reason"])
            assert {k: v for k, v in first.items() if k not in ("oldest_unread_age_s", "reason")} == {
                "pipeline": pipeline,
                "lag_records": 10,
                "max_lag_records": 1000,
                "max_lag_age_s": 300.0,
            }
            assert await by_age.next(QUIET_S) is None  # held: no batch committed since

            # nothing written: no ledger schema, no consumer group in Kafka
            assert ledger.schema_version() is None
            assert probe_groups(kafka_admin) == []

            # a reset past the old records moves the cursors: the hold ends, and the new records are young
            ledger.migrate()
            with ledger.transaction() as tx:
                tx.lock_pipeline(build_spec(pipeline, [topic], "/tmp/ako-lag-test-output"))
            kafka = KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})
            reset_offsets(ledger, kafka, pipeline, ResetRequest(ResetMode.TO_OFFSET, offset=3), ACTOR, dry_run=False)
            assert ledger.cursors(pipeline) == {TP(topic, 0): 3, TP(topic, 1): 3}
            assert await by_age.next(QUIET_S) is None
        finally:
            await by_age.stop()

        by_records = Events(KafkaLagTrigger(max_lag_records=4, **common))
        try:
            second = await by_records.next(timeout=30)
            assert second == {
                "pipeline": pipeline,
                "reason": "lag 4 records >= max_lag_records 4",
                "lag_records": 4,
                "oldest_unread_age_s": None,
                "max_lag_records": 4,
                "max_lag_age_s": None,
            }
            assert await by_records.next(QUIET_S) is None  # held
            reset_offsets(ledger, kafka, pipeline, ResetRequest(ResetMode.TO_LATEST), ACTOR, dry_run=False)
            assert await by_records.next(QUIET_S) is None  # cursors moved, but no lag left
            produce_at(stack.bootstrap_servers, topic, 1, 2, int(time.time() * 1000))
            assert await by_records.next(QUIET_S) is None  # 2 < 4
            produce_at(stack.bootstrap_servers, topic, 1, 2, int(time.time() * 1000))
            third = await by_records.next(timeout=30)
            assert third is not None and third["reason"] == "lag 4 records >= max_lag_records 4"
        finally:
            await by_records.stop()
        assert probe_groups(kafka_admin) == []

    asyncio.run(scenario())
