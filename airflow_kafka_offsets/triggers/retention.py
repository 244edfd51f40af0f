"""A trigger that fires before Kafka's retention can delete records a pipeline has not read yet:
for an ``AssetWatcher``, so that a DAG (an ingest run, an alert) reacts while they are still there.

Each poll computes, per partition, the time until retention may delete the oldest unread record
(core/retention.py): from that record's timestamp and the topic's ``retention.ms``, and from the
pace at which the log start offset has been seen moving (what ``retention.bytes`` does). It only
looks, like the lag trigger (triggers/watch.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg2
from airflow.sdk import Asset, AssetWatcher
from airflow.triggers.base import TriggerEvent

from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.lag import Fired, holding, read_positions, seconds, unread_positions
from airflow_kafka_offsets.core.model import TopicPartition
from airflow_kafka_offsets.core.retention import LogStartPace, PartitionRisk, at_risk, seconds_until_deletable, warning
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.triggers.watch import PipelineWatchTrigger, in_thread

CLASSPATH = "airflow_kafka_offsets.triggers.retention.KafkaRetentionRiskTrigger"


class KafkaRetentionRiskTrigger(PipelineWatchTrigger):
    """Fires when retention may delete unread records of ``pipeline`` within ``warn_within`` (seconds
    or a timedelta); checks every ``poll_interval``. The event's payload names the partitions at
    risk, soonest first, with their cursor, log start and ``deletable_in_s``. After firing it holds
    until a batch is committed or ``rearm_after`` has passed. Kafka or the ledger not answering is
    logged and retried at the next poll."""

    def __init__(
        self,
        pipeline: str,
        topics: Sequence[str] | str,
        warn_within: float | timedelta = 3600.0,
        poll_interval: float | timedelta = 60.0,
        rearm_after: float | timedelta = 3600.0,
        kafka_config_id: str = DEFAULT_KAFKA_CONN_ID,
        postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
        ledger_schema: str | None = None,
    ) -> None:
        super().__init__(pipeline, topics, poll_interval, rearm_after, kafka_config_id, postgres_conn_id, ledger_schema)
        self.warn_within_s = seconds(warn_within, "warn_within") or 0.0
        self._paces: dict[TopicPartition, LogStartPace] = {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {**self.watched(), "warn_within": self.warn_within_s}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fired: Fired | None = None
        logged: object = None
        while True:
            try:
                seen, risks = await self._look(fired)
            except (KafkaOffsetsError, psycopg2.Error) as exc:
                if str(exc) != logged:
                    self.log.warning(
                        "pipeline %s: retention risk unknown, retrying every %gs: %s",
                        self.pipeline,
                        self.poll_interval_s,
                        exc,
                    )
                    logged = str(exc)
            else:
                if isinstance(risks, str) or not risks:
                    line = risks or f"no unread record retention may delete within {self.warn_within_s:g}s"
                    if line != logged:
                        self.log.info("pipeline %s: %s", self.pipeline, line)
                        logged = line
                else:
                    reason = warning(self.pipeline, risks, self.warn_within_s)
                    self.log.warning("%s", reason)
                    logged, fired = reason, seen
                    yield TriggerEvent(  # type: ignore[no-untyped-call]
                        {
                            "pipeline": self.pipeline,
                            "reason": reason,
                            "warn_within_s": self.warn_within_s,
                            "partitions": [r.to_json() for r in risks],
                        }
                    )
            await asyncio.sleep(self.poll_interval_s)

    async def _look(self, fired: Fired | None) -> tuple[Fired, tuple[PartitionRisk, ...] | str]:
        """One poll: the read positions seen and the partitions at risk, or why it holds."""
        cursors, offsets = await in_thread(self.read_state)
        now = datetime.now(UTC)
        for tp, bounds in offsets.items():  # where each log start was first seen, to measure its pace
            if tp not in self._paces or bounds.earliest < self._paces[tp].offset:
                self._paces[tp] = LogStartPace(bounds.earliest, now)
        positions = read_positions(cursors, offsets)
        seen = Fired(positions, now)
        held = holding(fired, positions, now, self.rearm_after_s)
        if held is not None:
            return seen, held
        unread = unread_positions(cursors, offsets)
        retention = await in_thread(self.kafka().retention, list(self.topics)) if unread else {}
        oldest = await in_thread(self.timestamps_at, unread) if unread else {}
        deletable = {
            tp: seconds_until_deletable(
                positions[tp],
                offsets[tp],
                oldest.get(tp),
                retention.get(tp.topic),
                now,
                self._paces[tp].offsets_per_s(offsets[tp].earliest, now),
            )
            for tp in unread
        }
        return seen, at_risk(positions, offsets, deletable, self.warn_within_s)


def retention_risk_asset(trigger: KafkaRetentionRiskTrigger) -> Asset:
    """The asset ``kafka-offsets://<pipeline>/retention-risk`` watched by ``trigger``: each of its
    events says retention may soon delete unread records. Schedule a DAG on it to react."""
    return Asset(
        name=f"kafka_offsets_retention_risk/{trigger.pipeline}",
        uri=f"kafka-offsets://{trigger.pipeline}/retention-risk",
        watchers=[AssetWatcher(name=f"kafka_offsets_retention_risk_{trigger.pipeline}", trigger=trigger)],
    )
