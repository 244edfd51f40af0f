"""A trigger that fires when a pipeline's lag builds up: for an ``AssetWatcher``, so that the ingest
DAG runs when there is enough to ingest rather than on a clock.

It only looks: end offsets from Kafka's admin API, the cursors from the ledger in read-only
transactions, and (for the age threshold) the timestamp of the record at each lagging cursor
(triggers/watch.py).
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
from airflow_kafka_offsets.core.lag import (
    Fired,
    LagDecision,
    LagThresholds,
    decide,
    holding,
    read_positions,
    timestamps_needed,
)
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.triggers.watch import PipelineWatchTrigger, in_thread

CLASSPATH = "airflow_kafka_offsets.triggers.lag.KafkaLagTrigger"


class KafkaLagTrigger(PipelineWatchTrigger):
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
        super().__init__(pipeline, topics, poll_interval, rearm_after, kafka_config_id, postgres_conn_id, ledger_schema)
        self.thresholds = LagThresholds.of(max_lag_records, max_lag_age)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {**self.watched(), "max_lag_records": self.thresholds.records, "max_lag_age": self.thresholds.age_s},
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
        cursors, offsets = await in_thread(self.read_state)
        seen = Fired(read_positions(cursors, offsets), datetime.now(UTC))
        held = holding(fired, seen.positions, seen.at, self.rearm_after_s)
        if held is not None:
            return seen, held
        positions = timestamps_needed(cursors, offsets, self.thresholds)
        oldest = await in_thread(self.timestamps_at, positions) if positions else {}
        return seen, decide(cursors, offsets, oldest, self.thresholds, datetime.now(UTC))


def lag_asset(trigger: KafkaLagTrigger) -> Asset:
    """The asset watched by ``trigger``: each of its events says the pipeline has lag to ingest.
    Schedule the pipeline's ingest DAG on it (``schedule=[lag_asset(...)]``)."""
    return Asset(
        name=f"kafka_offsets_lag/{trigger.pipeline}",
        watchers=[AssetWatcher(name=f"kafka_offsets_lag_{trigger.pipeline}", trigger=trigger)],
    )
