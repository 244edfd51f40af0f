"""Offset resets, planned without I/O."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_kafka_offsets.core.model import PartitionOffsets, PartitionRange
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.operation_fields import OperationInputError, build_reset_request, parse_offset_ranges
from airflow_kafka_offsets.core.resets import (
    PartitionReset,
    ResetError,
    ResetMode,
    is_rewind,
    plan_reset,
    reset_ranges,
)
from airflow_kafka_offsets.core.spec import build_spec

SPEC = build_spec("p", ["a", "b"], "/tmp/o")
OFFSETS = {
    TP("a", 0): PartitionOffsets(10, 100),
    TP("a", 1): PartitionOffsets(0, 50),
    TP("b", 0): PartitionOffsets(0, 5),
}
CURSORS = {TP("a", 0): 40, TP("a", 1): 50, TP("b", 0): 5}


def reset(mode, value=None, topic=None, partitions=None, at_time=None):
    return plan_reset(SPEC, CURSORS, OFFSETS, build_reset_request(mode, value, topic, partitions), at_time)


def test_to_earliest_and_latest():
    assert [r.after for r in reset("to-earliest")] == [10, 0, 0]
    assert [r.after for r in reset("to-latest")] == [100, 50, 5]


def test_to_offset_per_partition():
    assert reset("to-offset", "20", topic="a", partitions="0") == (PartitionReset("a", 0, 40, 20),)


def test_to_offset_out_of_range_is_refused():
    with pytest.raises(ResetError, match=r"offset 5 is out of range for a-0: Kafka holds \[10, 100\)"):
        reset("to-offset", 5, topic="a", partitions=[0])


def test_shift_by_clamps_like_kafka():
    assert [r.after for r in reset("shift-by", "-45", topic="a")] == [10, 5]
    assert [r.after for r in reset("shift-by", "+1000", topic="a")] == [100, 50]


def test_to_datetime_uses_offsets_for_times_and_goes_to_end_when_none():
    at_time = {TP("a", 0): 33, TP("a", 1): None, TP("b", 0): 2}
    assert [r.after for r in reset("to-datetime", "2026-11-01T00:00:00Z", at_time=at_time)] == [33, 50, 2]


@pytest.mark.parametrize(
    "args,error,match",
    [
        (("to-somewhere",), OperationInputError, "Reset: mode: 'to-somewhere' is not a reset mode"),
        (("to-offset", "x"), OperationInputError, "expected a whole number such as 42, got 'x'"),
        (("to-offset", "-1"), OperationInputError, "must be at least 0"),
        (("to-datetime", "yesterday"), OperationInputError, "'yesterday' is not a timestamp: use ISO 8601"),
        (("to-datetime", ""), OperationInputError, "to-datetime needs a timestamp"),
        (("to-latest", None, "c"), ResetError, "topic 'c' is not part of pipeline"),
        (("to-latest", None, "a", "7"), ResetError, r"partition\(s\) \[7\] do not exist"),
        (("to-latest", None, "a", "x"), OperationInputError, "'x' is not a list of partition numbers"),
    ],
)
def test_bad_reset_input(args, error, match):
    with pytest.raises(error, match=match):
        reset(*args)


@pytest.mark.parametrize("blank", [None, "", "   "])
def test_blank_topic_and_partitions_mean_every_partition(blank):
    assert [(r.topic, r.partition, r.after) for r in reset("to-latest", None, blank, blank)] == [
        ("a", 0, 100),
        ("a", 1, 50),
        ("b", 0, 5),
    ]


def test_datetime_without_zone_is_utc():
    request = build_reset_request("to-datetime", "2026-11-21T08:00:00")
    assert request.mode is ResetMode.TO_DATETIME
    assert request.timestamp == datetime(2026, 11, 21, 8, tzinfo=UTC)


def test_forward_reset_records_the_skipped_span_in_the_same_epoch():
    resets = reset("to-latest", topic="a", partitions="0")
    assert not is_rewind(resets)
    assert reset_ranges(resets, CURSORS, new_epoch=False) == ((PartitionRange("a", 0, 100, 100, cursor=40), 40),)


def test_rewind_opens_an_epoch_marking_every_partition():
    resets = reset("to-offset", "20", topic="a", partitions="0")
    assert is_rewind(resets)
    assert reset_ranges(resets, CURSORS, new_epoch=True) == (
        (PartitionRange("a", 0, 20, 20, 20), 40),
        (PartitionRange("a", 1, 50, 50, 50), 50),
        (PartitionRange("b", 0, 5, 5, 5), 5),
    )


def test_offset_range_parsing():
    assert parse_offset_ranges("a:0:5-9, my.topic:12:0-1") == ((TP("a", 0), 5, 9), (TP("my.topic", 12), 0, 1))
    for bad in ("a:0:9-5", "a:0", "a:x:1-2", "a:0:1", "garbage"):
        with pytest.raises(OperationInputError, match="offset range"):
            parse_offset_ranges(bad)
