"""The time until retention may delete a pipeline's oldest unread record (core/retention.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_offsets.core.model import PartitionOffsets
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.retention import (
    LogStartPace,
    PartitionRisk,
    TopicRetention,
    at_risk,
    seconds_until_deletable,
    warning,
)

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
HOUR = TopicRetention(retention_ms=3_600_000, retention_bytes=None)


def test_topic_settings_from_kafkas_config_values():
    assert TopicRetention.from_configs({"retention.ms": "-1", "retention.bytes": "1048576"}) == TopicRetention(
        None, 1048576
    )
    assert TopicRetention.from_configs({"retention.ms": "604800000", "cleanup.policy": "compact"}).deletes is False
    assert TopicRetention.from_configs({"retention.ms": "5000", "cleanup.policy": "compact,delete"}).deletes is True


@pytest.mark.parametrize(
    ("cursor", "offsets", "written_ago_s", "retention", "pace", "expected"),
    [
        (10, PartitionOffsets(0, 20), 600, HOUR, None, 3000.0),  # by age: 1 h after it was written
        (10, PartitionOffsets(0, 20), 4000, HOUR, None, 0.0),  # past it: it may go any moment
        (None, PartitionOffsets(5, 20), 600, HOUR, None, 3000.0),  # no cursor: the log start is the next read
        (3, PartitionOffsets(5, 20), None, HOUR, None, 0.0),  # already below the log start: deleted
        (20, PartitionOffsets(0, 20), 600, HOUR, None, None),  # nothing unread
        (10, PartitionOffsets(0, 20), 600, TopicRetention(None, None), None, None),  # keeps everything
        (10, PartitionOffsets(0, 20), 600, TopicRetention(1000, None, deletes=False), None, None),  # compacted
        (10, PartitionOffsets(0, 20), 600, TopicRetention(None, 1024), 0.5, 20.0),  # by size: 10 offsets at 0.5/s
        (10, PartitionOffsets(0, 20), 600, HOUR, 0.001, 3000.0),  # the sooner bound counts
        (10, PartitionOffsets(0, 20), None, HOUR, None, None),  # no timestamp, no pace: unknown
    ],
)
def test_seconds_until_deletable(cursor, offsets, written_ago_s, retention, pace, expected):
    oldest = None if written_ago_s is None else NOW - timedelta(seconds=written_ago_s)
    assert seconds_until_deletable(cursor, offsets, oldest, retention, NOW, pace) == expected


def test_the_log_starts_pace_is_measured_from_where_it_was_first_seen():
    seen = LogStartPace(100, NOW - timedelta(seconds=50))
    assert seen.offsets_per_s(200, NOW) == 2.0
    assert seen.offsets_per_s(100, NOW) is None


def test_partitions_at_risk_soonest_first_and_the_warning_names_the_soonest():
    positions = {TP("o", 0): 10, TP("o", 1): 4, TP("o", 2): 7}
    offsets = {tp: PartitionOffsets(0, 20) for tp in positions}
    risks = at_risk(positions, offsets, {TP("o", 0): 500.0, TP("o", 1): 30.0, TP("o", 2): 7200.0}, 600)
    assert risks == (PartitionRisk(TP("o", 1), 4, 0, 30.0), PartitionRisk(TP("o", 0), 10, 0, 500.0))
    assert warning("orders", risks, 600) == (
        "retention may delete unread records of pipeline 'orders' in 30s: o-1 from offset 4 and 1 more "
        "partition(s) (warning at 600s); ingest now, or raise the topic's retention"
    )
    assert risks[0].to_json() == {
        "topic": "o",
        "partition": 1,
        "cursor": 4,
        "log_start_offset": 0,
        "deletable_in_s": 30.0,
    }
