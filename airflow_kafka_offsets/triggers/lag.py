"""A trigger that fires when a pipeline's lag builds up: for an ``AssetWatcher``, so that the ingest
DAG runs when there is enough to ingest rather than on a clock.

It only looks: end offsets from Kafka's admin API, the cursors from the ledger in read-only
transactions, and (for the age threshold) the timestamp of the record at each lagging cursor,
read by a consumer that is assigned partitions, never joins a group and never commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg2
from airflow.sdk import Asset, AssetWatcher
from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.lag import (
    Fired,
    LagDecision,
    LagThresholds,
    decide,
    holding,
    read_positions,
    seconds,
    timestamps_needed,
)
from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.core.spec import validate_pipeline_name, validate_topics
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.runtime import AirflowRuntime

T = TypeVar("T")
CLASSPATH = "airflow_kafka_offsets.triggers.lag.KafkaLagTrigger"
KAFKA_TIMEOUT_S = 10.0  # one poll's Kafka round trips; a slower answer is retried at the next poll


class KafkaLagTrigger(BaseEventTrigger):
    """Fires when ``pipeline`` has ``max_lag_records`` unread records or more over ``topics``, or its
    oldest unread record (by Kafka timestamp) is ``max_lag_age`` old; checks every ``poll_interval``.

    Lag counts offsets from the ledger's cursor (the log start for a partition without one) to
    Kafka's last stable offset. After firing it holds until a batch is committed (the cursors
    move) or ``rearm_after`` has passed, so one build-up starts one run. Kafka or the ledger not
    answering is logged and retried at the next poll. Connections are named by id; nothing secret
    is part of the trigger's arguments.
    """

    def __init__(
        self,
        pipeline: str,
        topics: Sequence[str] | str,
        max_lag_records: int | None = None,
        max_lag_age: float | timedelta | None = None,
        poll_interval: float | timedelta = 30.0,
        rearm_after: float | timedelta = 3600.0,
        kafka_config_id: str = DEFAULT_KAFKA_CONN_ID,
        postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
        ledger_schema: str | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.pipeline = validate_pipeline_name(pipeline)
        self.topics = validate_topics(pipeline, topics)
        self.thresholds = LagThresholds.of(max_lag_records, max_lag_age)
        self.poll_interval_s = seconds(poll_interval, "poll_interval") or 0.0
        self.rearm_after_s = seconds(rearm_after, "rearm_after") or 0.0
        self.kafka_config_id = kafka_config_id
        self.postgres_conn_id = postgres_conn_id
        self.ledger_schema = ledger_schema
        self._ledger: Ledger | None = None
        self._kafka: KafkaOffsetsClient | None = None
        self._timestamps: dict[tuple[TopicPartition, int], datetime] = {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "pipeline": self.pipeline,
                "topics": list(self.topics),
                "max_lag_records": self.thresholds.records,
                "max_lag_age": self.thresholds.age_s,
                "poll_interval": self.poll_interval_s,
                "rearm_after": self.rearm_after_s,
                "kafka_config_id": self.kafka_config_id,
                "postgres_conn_id": self.postgres_conn_id,
                "ledger_schema": self.ledger_schema,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fired: Fired | None = None
        logged: object = None  # what the last log line was about: another line only when that changes
        while True:
            try:
                seen, verdict = await self._look(fired)
            except (KafkaOffsetsError, psycopg2.Error) as exc:
                if str(exc) != logged:
                    self.log.warning(
                        "pipeline %s: lag unknown, retrying every %gs: %s", self.pipeline, self.poll_interval_s, exc
                    )
                    logged = str(exc)
            else:
                # the age changes at every poll: a line when the lag, the verdict or the hold changes
                line, about = (verdict, verdict) if isinstance(verdict, str) else (verdict.reason, verdict.brief)
                if about != logged:
                    self.log.info("pipeline %s: %s", self.pipeline, line)
                    logged = about
                if isinstance(verdict, LagDecision) and verdict.fire:
                    fired = seen
                    yield TriggerEvent(verdict.payload(self.pipeline, self.thresholds))  # type: ignore[no-untyped-call]
            await asyncio.sleep(self.poll_interval_s)

    async def _look(self, fired: Fired | None) -> tuple[Fired, LagDecision | str]:
        """One poll: the read positions seen (recorded if the trigger fires) and the decision, or why
        it holds after the last firing."""
        cursors, offsets = await _in_thread(self._read_state)
        seen = Fired(read_positions(cursors, offsets), datetime.now(UTC))
        held = holding(fired, seen.positions, seen.at, self.rearm_after_s)
        if held is not None:
            return seen, held
        positions = timestamps_needed(cursors, offsets, self.thresholds)
        oldest = await _in_thread(self._timestamps_at, positions) if positions else {}
        return seen, decide(cursors, offsets, oldest, self.thresholds, datetime.now(UTC))

    async def cleanup(self) -> None:
        if self._ledger is not None:
            await _in_thread(self._ledger.close)

    def _read_state(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, PartitionOffsets]]:
        """The cursors (read first: a commit in between only makes the lag look larger) and end offsets."""
        runtime = AirflowRuntime(self.kafka_config_id, self.postgres_conn_id, self.ledger_schema)
        if self._ledger is None:
            self._ledger = runtime.ledger(migrate=False)
        if self._kafka is None:
            self._kafka = runtime.kafka(timeout_s=KAFKA_TIMEOUT_S)
        cursors: dict[TopicPartition, int] = {}
        if self._ledger.schema_version() is not None:  # no ledger yet: no cursors
            with self._ledger.transaction(read_only=True) as tx:
                cursors = {tp: o for tp, o in tx.cursors(self.pipeline).items() if tp.topic in self.topics}
        return cursors, self._kafka.offsets(list(self.topics))

    def _timestamps_at(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, datetime | None]:
        """Record timestamps at ``positions``, remembered while a cursor stays where it is."""
        assert self._kafka is not None  # _read_state made it
        self._timestamps = {key: ts for key, ts in self._timestamps.items() if positions.get(key[0]) == key[1]}
        missing = {tp: pos for tp, pos in positions.items() if (tp, pos) not in self._timestamps}
        if missing:
            for tp, ts in self._kafka.timestamps_at(missing).items():
                if ts is not None:
                    self._timestamps[(tp, missing[tp])] = ts
        return {tp: self._timestamps.get((tp, pos)) for tp, pos in positions.items()}


async def _in_thread(function: Callable[..., T], *args: Any) -> T:
    """Blocking client calls (confluent-kafka, psycopg2, connection lookups) off the triggerer's event loop."""
    result: T = await sync_to_async(function, thread_sensitive=False)(*args)
    return result


def lag_asset(trigger: KafkaLagTrigger) -> Asset:
    """The asset watched by ``trigger``: each of its events says the pipeline has lag to ingest.
    Schedule the pipeline's ingest DAG on it (``schedule=[lag_asset(...)]``)."""
    return Asset(
        name=f"kafka_offsets_lag/{trigger.pipeline}",
        watchers=[AssetWatcher(name=f"kafka_offsets_lag_{trigger.pipeline}", trigger=trigger)],
    )
