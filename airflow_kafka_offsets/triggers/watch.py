"""What the package's triggers share: they watch one pipeline, reading the ledger's cursors in
read-only transactions and Kafka's offsets and record timestamps, without ever writing either.

Record timestamps are read by a consumer that is assigned partitions, never joins a group and never
commits. Blocking client calls run off the triggerer's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict, TypeVar

import psycopg2
from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.lag import Fired, seconds
from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.core.spec import validate_pipeline_name, validate_topics
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.runtime import AirflowRuntime

T = TypeVar("T")
KAFKA_TIMEOUT_S = 10.0  # one poll's Kafka round trips; a slower answer is retried at the next poll


class WatchArguments(TypedDict, total=False):
    """The arguments every watch trigger takes after its own: how often it looks, how long it holds
    after firing, and where (connection ids, the ledger's schema)."""

    poll_interval: float | timedelta
    rearm_after: float | timedelta
    kafka_config_id: str
    postgres_conn_id: str
    ledger_schema: str | None


@dataclass(frozen=True)
class Verdict:
    """One poll's outcome: ``line`` to log, ``about`` what it is about (an info line is logged again
    only when that changes, a warning every time), and the event's ``payload`` if the trigger fires."""

    line: str
    about: object
    payload: dict[str, Any] | None = None
    level: int = logging.INFO


class PipelineWatchTrigger(BaseEventTrigger):
    """Watches ``pipeline`` over ``topics`` every ``poll_interval``; after firing, holds until a batch
    is committed or ``rearm_after`` has passed (subclasses decide when to fire, in ``look``).
    Kafka or the ledger not answering is logged and retried at the next poll. Connections are named
    by id; nothing secret is part of a trigger's arguments."""

    watching = "state"  # what a failed poll leaves unknown, for its log line

    def __init__(
        self,
        pipeline: str,
        topics: Sequence[str] | str,
        poll_interval: float | timedelta = 30.0,
        rearm_after: float | timedelta = 3600.0,
        kafka_config_id: str = DEFAULT_KAFKA_CONN_ID,
        postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
        ledger_schema: str | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.pipeline = validate_pipeline_name(pipeline)
        self.topics = validate_topics(pipeline, topics)
        self.poll_interval_s = seconds(poll_interval, "poll_interval") or 0.0
        self.rearm_after_s = seconds(rearm_after, "rearm_after") or 0.0
        self.kafka_config_id = kafka_config_id
        self.postgres_conn_id = postgres_conn_id
        self.ledger_schema = ledger_schema
        self._ledger: Ledger | None = None
        self._kafka: KafkaOffsetsClient | None = None
        self._timestamps: dict[tuple[TopicPartition, int], datetime] = {}

    def watched(self) -> dict[str, Any]:
        """The arguments every watch trigger serializes."""
        return {
            "pipeline": self.pipeline,
            "topics": list(self.topics),
            "poll_interval": self.poll_interval_s,
            "rearm_after": self.rearm_after_s,
            "kafka_config_id": self.kafka_config_id,
            "postgres_conn_id": self.postgres_conn_id,
            "ledger_schema": self.ledger_schema,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fired: Fired | None = None
        logged: object = None  # what the last log line was about: another line only when that changes
        while True:
            try:
                seen, verdict = await self.look(fired)
            except (KafkaOffsetsError, psycopg2.Error) as exc:
                if str(exc) != logged:
                    self.log.warning(
                        "pipeline %s: %s unknown, retrying every %gs: %s",
                        self.pipeline,
                        self.watching,
                        self.poll_interval_s,
                        exc,
                    )
                    logged = str(exc)
            else:
                if verdict.level >= logging.WARNING or verdict.about != logged:
                    self.log.log(verdict.level, "%s", verdict.line)
                    logged = verdict.about
                if verdict.payload is not None:
                    fired = seen
                    yield TriggerEvent(verdict.payload)  # type: ignore[no-untyped-call]
            await asyncio.sleep(self.poll_interval_s)

    async def look(self, fired: Fired | None) -> tuple[Fired, Verdict]:
        """One poll: the read positions seen (recorded if the trigger fires) and the verdict."""
        raise NotImplementedError

    async def cleanup(self) -> None:
        if self._ledger is not None:
            await in_thread(self._ledger.close)

    def kafka(self) -> KafkaOffsetsClient:
        if self._kafka is None:
            self._kafka = AirflowRuntime(self.kafka_config_id).kafka(timeout_s=KAFKA_TIMEOUT_S)
        return self._kafka

    def read_state(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, PartitionOffsets]]:
        """The cursors (read first: a commit in between only makes the lag look larger) and Kafka's offsets."""
        if self._ledger is None:
            runtime = AirflowRuntime(self.kafka_config_id, self.postgres_conn_id, self.ledger_schema)
            self._ledger = runtime.ledger(migrate=False)
        cursors: dict[TopicPartition, int] = {}
        if self._ledger.schema_version() is not None:  # no ledger yet: no cursors
            with self._ledger.transaction(read_only=True) as tx:
                cursors = {tp: o for tp, o in tx.cursors(self.pipeline).items() if tp.topic in self.topics}
        return cursors, self.kafka().offsets(list(self.topics))

    def timestamps_at(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, datetime | None]:
        """Record timestamps at ``positions``, remembered while a cursor stays where it is."""
        self._timestamps = {key: ts for key, ts in self._timestamps.items() if positions.get(key[0]) == key[1]}
        missing = {tp: pos for tp, pos in positions.items() if (tp, pos) not in self._timestamps}
        if missing:
            for tp, ts in self.kafka().timestamps_at(missing).items():
                if ts is not None:
                    self._timestamps[(tp, missing[tp])] = ts
        return {tp: self._timestamps.get((tp, pos)) for tp, pos in positions.items()}


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """Blocking client calls (confluent-kafka, psycopg2, connection lookups) off the triggerer's event loop."""
    result: T = await sync_to_async(function, thread_sensitive=False)(*args)
    return result
