"""Series for the pipelines page's charts from the ledger's committed batches, and the state rule (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_kafka_offsets.core.history import (
    BatchPoint,
    PipelineState,
    Point,
    Scale,
    lag_age,
    lag_records,
    per_batch,
    range_seconds,
    state,
    unknown_range,
)

T0 = datetime(2026, 11, 22, 8, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


# batch 1 planned at 0 over 100 offsets, committed at 1; a reset (2) reads nothing; batch 3 at 5 -> 6.5
HISTORY = [
    BatchPoint(1, "ingest", at(0), at(1), 100, 5000, 100),
    BatchPoint(2, "reset", at(2), at(2), 0, 0, 0),
    BatchPoint(3, "ingest", at(5), at(6.5), 40, 2000, 42),
]


def test_lag_in_records_is_what_each_plan_covered_then_kafkas_lag_now():
    assert lag_records(HISTORY, at(10), 7) == [Point(at(0), 100, 1), Point(at(5), 42, 3), Point(at(10), 7, None)]
    assert lag_records(HISTORY, at(10), None)[-1] == Point(at(5), 42, 3)  # Kafka did not answer: no "now"


def test_age_bound_drops_at_each_commit_and_grows_until_now():
    assert lag_age(HISTORY, at(10)) == [
        Point(at(1), 60.0, 1),  # after batch 1: nothing older than its plan (1 min) is unread
        Point(at(6.5), 390.0, 3),  # just before batch 3 commits: up to its predecessor's plan
        Point(at(6.5), 90.0, 3),  # just after
        Point(at(10), 300.0, None),  # now: 5 minutes since batch 3 was planned
    ]
    assert lag_age([], at(10)) == []


def test_per_batch_records_bytes_and_seconds_skip_resets():
    series = per_batch(HISTORY)
    # each at its commit, spanning from its plan
    assert series["records"] == [Point(at(1), 100, 1, at(0)), Point(at(6.5), 40, 3, at(5))]
    assert series["bytes"] == [Point(at(1), 5000, 1, at(0)), Point(at(6.5), 2000, 3, at(5))]
    assert series["seconds"] == [Point(at(1), 60.0, 1, at(0)), Point(at(6.5), 90.0, 3, at(5))]


def test_an_unknown_range_is_named_with_the_ranges_there_are():
    assert [unknown_range(n) for n in ("hour", "day", "week", None)] == [None] * 4
    assert unknown_range("year") == "unknown range 'year': choose one of hour, day, week (shown: the last day)"
    assert unknown_range("<b>") == "unknown range '<b>': choose one of hour, day, week (shown: the last day)"


def test_ranges_by_name_default_to_a_day():
    assert [range_seconds(n) for n in ("hour", "week", None, "year")] == [
        ("hour", 3600),
        ("week", 604800),
        ("day", 86400),
        ("day", 86400),
    ]


def test_state_is_the_worst_that_applies():
    ok = {"lost_partitions": 0, "failing_attempts": 0, "lag_records": 5, "age_bound_s": 60.0, "lagging_after_s": 900}
    assert state(**ok) is PipelineState.HEALTHY
    assert state(**{**ok, "age_bound_s": 901.0}) is PipelineState.LAGGING
    assert state(**{**ok, "age_bound_s": None}) is PipelineState.LAGGING  # never committed: unknown age
    assert state(**{**ok, "lag_records": 0, "age_bound_s": 9999.0}) is PipelineState.HEALTHY  # nothing unread
    assert state(**{**ok, "age_bound_s": 901.0, "failing_attempts": 1}) is PipelineState.FAILING
    assert state(**{**ok, "failing_attempts": 1, "lost_partitions": 2}) is PipelineState.DATA_AT_RISK


def test_scale_maps_onto_pixels_from_zero():
    y = Scale.of([10, 40], 120)
    assert (y(0), y(10), y(40)) == (0.0, 30.0, 120.0)
    assert Scale.of([5, 5], 100, zero=False)(5) == 50.0  # flat: the middle
    assert Scale.of([], 100)(0) == 0.0
