"""A trigger that fires when a pipeline's lag builds up: for an ``AssetWatcher``, so that the ingest
DAG runs when there is enough to ingest rather than on a clock.

It only looks: end offsets from Kafka's admin API, the cursors from the ledger in read-only
transactions, and (for the age threshold) the timestamp of the record at each lagging cursor
(triggers/watch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

from airflow.sdk import Asset, AssetWatcher

from airflow_kafka_offsets.core.lag import (
    Fired,
    LagThresholds,
    decide,
    holding,
    read_positions,
    timestamps_needed,
)
from airflow_kafka_offsets.triggers.watch import PipelineWatchTrigger, Verdict, WatchArguments, in_thread

CLASSPATH = "airflow_kafka_offsets.triggers.lag.KafkaLagTrigger"


class KafkaLagTrigger(PipelineWatchTrigger):
    """Fires when ``pipeline`` has ``max_lag_records`` unread records or more over ``topics``, or its
    oldest unread record (by Kafka timestamp) is ``max_lag_age`` old; checks every ``poll_interval``.

    Lag counts offsets from the ledger's cursor (the log start for a partition without one) to
    Kafka's last stable offset. After firing it holds until a batch is committed (the cursors
    move) or ``rearm_after`` has passed, so one build-up starts one run. Kafka or the ledger not
    answering is logged and retried at the next poll. Connections are named by id; nothing secret
    is part of the trigger's arguments. ``poll_interval`` (30 s), ``rearm_after``, the connection ids
    and ``ledger_schema`` are the keywords every watch trigger takes (:class:`WatchArguments`).
    """

    watching = "lag"

    def __init__(
        self,
        pipeline: str,
        topics: Sequence[str] | str,
        max_lag_records: int | None = None,
        max_lag_age: float | timedelta | None = None,
        **watch: Unpack[WatchArguments],
    ) -> None:
        super().__init__(pipeline, topics, **watch)
        self.thresholds = LagThresholds.of(max_lag_records, max_lag_age)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {**self.watched(), "max_lag_records": self.thresholds.records, "max_lag_age": self.thresholds.age_s},
        )

    async def look(self, fired: Fired | None) -> tuple[Fired, Verdict]:
        cursors, offsets = await in_thread(self.read_state)
        seen = Fired(read_positions(cursors, offsets), datetime.now(UTC))
        held = holding(fired, seen.positions, seen.at, self.rearm_after_s)
        if held is not None:
            return seen, Verdict(f"pipeline {self.pipeline}: {held}", held)
        positions = timestamps_needed(cursors, offsets, self.thresholds)
        oldest = await in_thread(self.timestamps_at, positions) if positions else {}
        decision = decide(cursors, offsets, oldest, self.thresholds, datetime.now(UTC))
        # the age changes at every poll: a line when the lag, the verdict or the hold changes
        return seen, Verdict(
            f"pipeline {self.pipeline}: {decision.reason}",
            decision.brief,
            decision.payload(self.pipeline, self.thresholds) if decision.fire else None,
        )


def lag_asset(trigger: KafkaLagTrigger) -> Asset:
    """The asset watched by ``trigger``: each of its events says the pipeline has lag to ingest.
    Schedule the pipeline's ingest DAG on it (``schedule=[lag_asset(...)]``)."""
    return Asset(
        name=f"kafka_offsets_lag/{trigger.pipeline}",
        watchers=[AssetWatcher(name=f"kafka_offsets_lag_{trigger.pipeline}", trigger=trigger)],
    )
