"""A trigger that fires before Kafka's retention can delete records a pipeline has not read yet:
for an ``AssetWatcher``, so that a DAG (an ingest run, an alert) reacts while they are still there.

Each poll computes, per partition, the time until retention may delete the oldest unread record
(core/retention.py): from that record's timestamp and the topic's ``retention.ms``, and from the
pace at which the log start offset has been seen moving (what ``retention.bytes`` does). It only
looks, like the lag trigger (triggers/watch.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

from airflow.sdk import Asset, AssetWatcher

from airflow_kafka_offsets.core.lag import Fired, holding, read_positions, seconds, unread_positions
from airflow_kafka_offsets.core.model import TopicPartition
from airflow_kafka_offsets.core.retention import LogStartPace, PartitionRisk, at_risk, seconds_until_deletable, warning
from airflow_kafka_offsets.triggers.watch import PipelineWatchTrigger, Verdict, WatchArguments, in_thread

CLASSPATH = "airflow_kafka_offsets.triggers.retention.KafkaRetentionRiskTrigger"


class KafkaRetentionRiskTrigger(PipelineWatchTrigger):
    """Fires when retention may delete unread records of ``pipeline`` within ``warn_within`` (seconds
    or a timedelta); checks every ``poll_interval``. The event's payload names the partitions at
    risk, soonest first, with their cursor, log start and ``deletable_in_s``. After firing it holds
    until a batch is committed or ``rearm_after`` has passed. Kafka or the ledger not answering is
    logged and retried at the next poll. ``poll_interval`` (60 s here), ``rearm_after``, the
    connection ids and ``ledger_schema`` are the keywords every watch trigger takes
    (:class:`WatchArguments`)."""

    watching = "retention risk"

    def __init__(
        self,
        pipeline: str,
        topics: Sequence[str] | str,
        warn_within: float | timedelta = 3600.0,
        **watch: Unpack[WatchArguments],
    ) -> None:
        watch.setdefault("poll_interval", 60.0)
        super().__init__(pipeline, topics, **watch)
        self.warn_within_s = seconds(warn_within, "warn_within") or 0.0
        self._paces: dict[TopicPartition, LogStartPace] = {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {**self.watched(), "warn_within": self.warn_within_s}

    async def look(self, fired: Fired | None) -> tuple[Fired, Verdict]:
        cursors, offsets = await in_thread(self.read_state)
        now = datetime.now(UTC)
        for tp, bounds in offsets.items():  # where each log start was first seen, to measure its pace
            if tp not in self._paces or bounds.earliest < self._paces[tp].offset:
                self._paces[tp] = LogStartPace(bounds.earliest, now)
        positions = read_positions(cursors, offsets)
        seen = Fired(positions, now)
        held = holding(fired, positions, now, self.rearm_after_s)
        if held is not None:
            return seen, Verdict(f"pipeline {self.pipeline}: {held}", held)
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
        return seen, self._verdict(at_risk(positions, offsets, deletable, self.warn_within_s))

    def _verdict(self, risks: tuple[PartitionRisk, ...]) -> Verdict:
        """Quiet while nothing is at risk; else a warning, and an event naming the partitions at risk."""
        if not risks:
            line = f"no unread record retention may delete within {self.warn_within_s:g}s"
            return Verdict(f"pipeline {self.pipeline}: {line}", line)
        reason = warning(self.pipeline, risks, self.warn_within_s)
        payload = {
            "pipeline": self.pipeline,
            "reason": reason,
            "warn_within_s": self.warn_within_s,
            "partitions": [r.to_json() for r in risks],
        }
        return Verdict(reason, reason, payload, logging.WARNING)


def retention_risk_asset(trigger: KafkaRetentionRiskTrigger) -> Asset:
    """The asset ``kafka-offsets://<pipeline>/retention-risk`` watched by ``trigger``: each of its
    events says retention may soon delete unread records. Schedule a DAG on it to react."""
    return Asset(
        name=f"kafka_offsets_retention_risk/{trigger.pipeline}",
        uri=f"kafka-offsets://{trigger.pipeline}/retention-risk",
        watchers=[AssetWatcher(name=f"kafka_offsets_retention_risk_{trigger.pipeline}", trigger=trigger)],
    )
