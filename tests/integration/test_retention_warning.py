"""The retention early warning on the real broker: a topic with retention.ms of 20 s, records the
pipeline has not read, and the warning (``status`` and the trigger's event) before the broker
deletes them, with a prediction the broker then keeps: not deleted before the time announced.
"""

from __future__ import annotations

import asyncio
import re
import time

import psycopg2
import pytest

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.service.operations.status import pipeline_status, render_status
from airflow_kafka_offsets.triggers import KafkaRetentionRiskTrigger

from .helpers import produce
from .pipeline import operation_context
from .test_lag_trigger import QUIET_S, Events

# Serial: the warning must come before the broker's retention deletes, a race a loaded machine would shift.
pytestmark = pytest.mark.serial

RETENTION_S = 20


def test_the_warning_fires_before_the_broker_deletes_unread_records(stack, make_topic, schema):
    topic = make_topic(partitions=1, config={"retention.ms": str(RETENTION_S * 1000)})
    produce(stack.bootstrap_servers, topic, 6, partitions=1)
    written = time.time()
    pipeline = f"ret_{schema}"
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema)
    ledger.migrate()
    with ledger.transaction() as tx:
        tx.lock_pipeline(build_spec(pipeline, [topic], "/tmp/ako-retention-test-output"))
    ctx = operation_context(ledger, stack)
    reset_offsets(ctx, pipeline, ResetRequest(ResetMode.TO_OFFSET, offset=0), dry_run=False)
    kafka = KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})

    status = pipeline_status(ctx, pipeline)
    (part,) = status["partitions"]
    assert (part["committed_offset"], part["log_start_offset"], part["lag_records"]) == (0, 0, 6)
    assert 0 < part["deletable_in_s"] <= RETENTION_S and status["deletable_in_s"] == part["deletable_in_s"]
    assert "deletable in (s)" in render_status(status)

    common = {"pipeline": pipeline, "topics": [topic], "poll_interval": 0.5, "ledger_schema": schema}

    async def scenario() -> tuple[dict, float]:
        quiet = Events(KafkaRetentionRiskTrigger(warn_within=1, **common))  # 20 s left: not yet
        warned = Events(KafkaRetentionRiskTrigger(warn_within=60, **common))
        try:
            event = await warned.next(timeout=30)
            fired_at = time.time()
            assert event is not None
            assert kafka.offsets([topic])[TP(topic, 0)].earliest == 0  # the records are still there
            assert await warned.next(QUIET_S) is None  # held: nothing committed since
            assert await quiet.next(QUIET_S) is None
            return event, fired_at
        finally:
            await warned.stop()
            await quiet.stop()

    event, fired_at = asyncio.run(scenario())
    (risk,) = event["partitions"]
    assert {k: v for k, v in risk.items() if k != "deletable_in_s"} == {
        "topic": topic,
        "partition": 0,
        "cursor": 0,
        "log_start_offset": 0,
    }
    assert 0 < risk["deletable_in_s"] <= RETENTION_S
    assert re.fullmatch(
        rf"retention may delete unread records of pipeline '{pipeline}' in \d+s: {topic}-0 from offset 0 "
        r"\(warning at 60s\); ingest now, or raise the topic's retention",
        event["reason"],
    )
    assert {k: event[k] for k in ("pipeline", "warn_within_s")} == {"pipeline": pipeline, "warn_within_s": 60.0}

    # The broker deletes the records later, and not before the time the warning announced.
    deadline = time.time() + RETENTION_S + 60
    while kafka.offsets([topic])[TP(topic, 0)].earliest == 0:
        assert time.time() < deadline, "the broker did not delete the expired records"
        time.sleep(0.5)
    deleted_at = time.time()
    assert deleted_at >= fired_at and deleted_at >= written + RETENTION_S - 1
    assert deleted_at >= fired_at + risk["deletable_in_s"] - 1
    after = pipeline_status(ctx, pipeline)["partitions"][0]
    assert (after["committed_offset"], after["log_start_offset"], after["deletable_in_s"]) == (0, 6, 0.0)
    assert ledger.cursors(pipeline) == {TP(topic, 0): 0}  # the warning changed nothing
