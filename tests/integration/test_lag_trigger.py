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
from pathlib import Path
from typing import Any

import psycopg2
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.triggers import KafkaLagTrigger

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce
from .pipeline import operation_context
from .test_assets_lineage import airflow_variables, api, runs_of, wait_until_finished
from .test_manual_ops_ui import wait_until

QUIET_S = 2.0  # ten polls of the in-process triggers
# what dags/kafka_lag_ingest_example.py watches: 100 records or 10 minutes, polled every 5 s
LAG_DAG_ID, LAG_PIPELINE, LAG_TOPIC, LAG_ASSET = (
    "kafka_lag_ingest_example",
    "lag_events",
    "lag-events",
    "kafka_offsets_lag/lag_events",
)
LAG_POLL_S = 5


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
            ctx = operation_context(ledger, stack)
            reset_offsets(ctx, pipeline, ResetRequest(ResetMode.TO_OFFSET, offset=3), dry_run=False)
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
            reset_offsets(ctx, pipeline, ResetRequest(ResetMode.TO_LATEST), dry_run=False)
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


def recreate_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    """``topic`` empty, with ``partitions`` partitions (deleted first when a reused stack has it)."""
    if topic in admin.list_topics(timeout=30).topics:
        admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return
        except KafkaException as exc:  # the deleted topic is still going away
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_watcher_in_the_triggerer_starts_one_ingest_run_once_lag_reaches_100(airflow_ui, stack, kafka_admin, tmp_path):
    schema = airflow_ui["ledger_schema"]  # the deployment's ledger: start it afresh
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    recreate_topic(kafka_admin, LAG_TOPIC, 2)
    triggerer_log = Path(airflow_ui["home"]) / "logs" / "triggerer.out"
    log_from = triggerer_log.stat().st_size
    output = tmp_path / "out"
    (asset,) = api(airflow_ui, f"assets?name_pattern={LAG_ASSET}")["assets"]

    def events() -> list[dict]:
        return api(airflow_ui, f"assets/events?asset_id={asset['id']}&limit=100")["asset_events"]

    def triggerer_says(text: str) -> bool:
        with triggerer_log.open() as log:
            log.seek(log_from)
            return text in log.read()

    events_before = {e["id"] for e in events()}
    runs_before = set(runs_of(airflow_ui, LAG_DAG_ID))
    with airflow_variables(airflow_ui, {"kafka_offsets_lag_output": str(output)}):
        try:
            api(airflow_ui, f"dags/{LAG_DAG_ID}", "PATCH", {"is_paused": False})
            started = time.monotonic()
            produced = produce(stack.bootstrap_servers, LAG_TOPIC, 60, partitions=2)
            # the watcher saw the 60 records and held; two more looks change nothing
            wait_until(lambda: triggerer_says("pipeline lag_events: lag 60 records < 100"), "a look at lag 60", 90)
            time.sleep(2 * LAG_POLL_S)
            (watched,) = api(airflow_ui, f"assets?name_pattern={LAG_ASSET}")["assets"]
            assert [w["name"] for w in watched["watchers"]] == ["kafka_offsets_lag_lag_events"]
            assert [e for e in events() if e["id"] not in events_before] == []
            assert set(runs_of(airflow_ui, LAG_DAG_ID)) == runs_before
            quiet = time.monotonic() - started

            produced += produce(stack.bootstrap_servers, LAG_TOPIC, 40, partitions=2)
            crossed = time.monotonic()
            wait_until(lambda: [e for e in events() if e["id"] not in events_before], "the asset event", 60)
            fired = time.monotonic() - crossed
            runs = wait_until_finished(airflow_ui, LAG_DAG_ID, runs_before, 1)
            time.sleep(LAG_POLL_S + 1)  # the commit moved the cursors: no lag, nothing more fires
            print(
                f"quiet phase {quiet:.0f}s, fired {fired:.0f}s after crossing,"
                f" run done {time.monotonic() - crossed:.0f}s"
            )
        finally:
            api(airflow_ui, f"dags/{LAG_DAG_ID}", "PATCH", {"is_paused": True})

    (event,) = [e for e in events() if e["id"] not in events_before]
    assert event["extra"] == {
        "from_trigger": True,
        "payload": {
            "pipeline": LAG_PIPELINE,
            "reason": "lag 100 records >= max_lag_records 100",
            "lag_records": 100,
            "oldest_unread_age_s": None,
            "max_lag_records": 100,
            "max_lag_age_s": 600.0,
        },
    }
    assert triggerer_says("pipeline lag_events: lag 100 records >= max_lag_records 100")
    (run,) = runs_of(airflow_ui, LAG_DAG_ID).keys() - runs_before
    assert runs == {run: runs[run]} and runs[run]["run_type"] == "asset_triggered"
    # the run the event caused ingested exactly the 100 records
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema)
    assert ledger_ranges(ledger, LAG_PIPELINE) == [
        (1, "committed", LAG_TOPIC, 0, 0, 0, 50, 50),
        (1, "committed", LAG_TOPIC, 1, 0, 0, 50, 50),
    ]
    assert_exactly_once(committed_rows(ledger, LAG_PIPELINE), produced)
