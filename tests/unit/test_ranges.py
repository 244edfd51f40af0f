"""The planner: pure rules, checked by example and by property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_offsets.core.model import DataLossPolicy, PartitionOffsets, PartitionRange, StartPolicy
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.planner import fair_shares, has_work, new_partitions, plan_ranges
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import (
    DataLossError,
    InvalidPipelineSpecError,
    NoStartingOffsetError,
    OffsetOutOfRangeError,
    PartitionVanishedError,
    UnknownTopicError,
)


def spec(**kw):
    kw.setdefault("output_root", "/tmp/out")
    topics = kw.pop("topics", ["t"])
    return build_spec("p", topics, **kw)


def offs(**parts: tuple[int, int]) -> dict[TP, PartitionOffsets]:
    """offs(t0=(0, 10)) -> {TP('t', 0): PartitionOffsets(0, 10)}"""
    out = {}
    for key, (lo, hi) in parts.items():
        topic, part = key[:-1], int(key[-1])
        out[TP(topic, part)] = PartitionOffsets(lo, hi)
    return out


def test_new_partitions_get_a_cursor_at_their_range_start():
    ranges = (PartitionRange("t", 0, 4, 9, 4), PartitionRange("t", 1, 7, 7, 3), PartitionRange("u", 0, 2, 5, 2))
    assert new_partitions(ranges, {TP("t", 0): 4, TP("u", 1): 0}) == {TP("t", 1): 7, TP("u", 0): 2}
    assert new_partitions(ranges, {TP("t", 0): 4, TP("t", 1): 3, TP("u", 0): 2}) == {}


def test_first_batch_starts_at_earliest_by_default():
    ranges = plan_ranges(spec(), {}, offs(t0=(5, 20), t1=(0, 0)))
    assert ranges == (PartitionRange("t", 0, 5, 20, 5), PartitionRange("t", 1, 0, 0, 0))


def test_first_batch_latest_policy_reads_nothing_but_pins_start():
    ranges = plan_ranges(spec(starting_offsets="latest"), {}, offs(t0=(5, 20)))
    assert ranges == (PartitionRange("t", 0, 20, 20, 20),)
    assert has_work(ranges, {})  # the start must be recorded, or the next run would start later


def test_first_batch_error_policy():
    with pytest.raises(NoStartingOffsetError, match="t-0"):
        plan_ranges(spec(starting_offsets="error"), {}, offs(t0=(0, 3)))


def test_continues_from_cursor():
    ranges = plan_ranges(spec(), {TP("t", 0): 7}, offs(t0=(0, 12)))
    assert ranges == (PartitionRange("t", 0, 7, 12, 7),)


def test_nothing_new_is_no_work():
    cursors = {TP("t", 0): 12}
    ranges = plan_ranges(spec(), cursors, offs(t0=(0, 12)))
    assert not has_work(ranges, cursors)


@pytest.mark.parametrize("policy,start", [("earliest", 3), ("latest", 9)])
def test_partition_added_later_follows_new_partition_policy(policy, start):
    cursors = {TP("t", 0): 4}
    ranges = plan_ranges(spec(new_partition_offsets=policy), cursors, offs(t0=(0, 4), t1=(3, 9)))
    assert ranges[1] == PartitionRange("t", 1, start, 9, start)
    assert has_work(ranges, cursors)


def test_partition_added_later_error_policy():
    with pytest.raises(NoStartingOffsetError, match="t-1"):
        plan_ranges(spec(new_partition_offsets="error"), {TP("t", 0): 0}, offs(t0=(0, 4), t1=(0, 9)))


def test_first_sight_policy_only_for_the_first_batch():
    # starting_offsets=latest for a new pipeline, but a partition added later starts at earliest
    s = spec(starting_offsets="latest", new_partition_offsets="earliest")
    ranges = plan_ranges(s, {TP("t", 0): 10}, offs(t0=(0, 10), t1=(0, 5)))
    assert ranges[1].start == 0


def test_data_loss_fails_with_span_in_message():
    with pytest.raises(DataLossError, match=r"t-0 offsets \[3, 10\) \(7 records\)"):
        plan_ranges(spec(), {TP("t", 0): 3}, offs(t0=(10, 20)))


def test_data_loss_lists_every_partition():
    with pytest.raises(DataLossError) as err:
        plan_ranges(spec(), {TP("t", 0): 3, TP("t", 1): 1}, offs(t0=(10, 20), t1=(2, 4)))
    assert "t-0" in str(err.value) and "t-1" in str(err.value)


def test_data_loss_skip_records_the_gap():
    ranges = plan_ranges(spec(on_data_loss="skip"), {TP("t", 0): 3}, offs(t0=(10, 20)))
    assert ranges == (PartitionRange("t", 0, start=10, end=20, cursor=3),)
    assert ranges[0].lost == 7


def test_cursor_beyond_latest_is_an_error():
    with pytest.raises(OffsetOutOfRangeError, match="cursor 50 > latest offset 10"):
        plan_ranges(spec(), {TP("t", 0): 50}, offs(t0=(0, 10)))


def test_vanished_partition_is_an_error():
    with pytest.raises(PartitionVanishedError, match="t-2"):
        plan_ranges(spec(), {TP("t", 0): 0, TP("t", 2): 5}, offs(t0=(0, 10)))


def test_missing_topic_is_an_error():
    with pytest.raises(UnknownTopicError, match="u"):
        plan_ranges(spec(topics=["t", "u"]), {}, offs(t0=(0, 1)))


def test_cursors_of_topics_no_longer_in_spec_are_ignored():
    ranges = plan_ranges(spec(), {TP("old", 0): 5, TP("t", 0): 1}, offs(t0=(0, 3)))
    assert ranges == (PartitionRange("t", 0, 1, 3, 1),)


def test_several_topics():
    ranges = plan_ranges(spec(topics=["b", "a"]), {}, offs(a0=(0, 2), b0=(0, 3), b1=(1, 1)))
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [("a", 0, 0, 2), ("b", 0, 0, 3), ("b", 1, 1, 1)]


def test_per_partition_cap():
    ranges = plan_ranges(spec(max_records_per_partition=5), {}, offs(t0=(0, 100), t1=(0, 3)))
    assert [r.span for r in ranges] == [5, 3]


def test_total_cap_is_shared_fairly():
    ranges = plan_ranges(spec(max_records_per_batch=10), {}, offs(t0=(0, 100), t1=(0, 2), t2=(0, 100)))
    assert [r.span for r in ranges] == [4, 2, 4]


def test_both_caps():
    ranges = plan_ranges(spec(max_records_per_batch=9, max_records_per_partition=2), {}, offs(t0=(0, 100), t1=(0, 100)))
    assert [r.span for r in ranges] == [2, 2]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"topics": []}, "names no topics"),
        ({"topics": ["bad topic"]}, "invalid Kafka topic"),
        ({"topics": ["a", "a"]}, "twice"),
        ({"starting_offsets": "first"}, "starting_offsets must be one of earliest, latest, error"),
        ({"on_data_loss": "ignore"}, "on_data_loss must be one of fail, skip"),
        ({"max_records_per_batch": 0}, "positive integer"),
        ({"max_records_per_partition": "ten"}, "positive integer"),
        ({"max_records_per_batch": "1.5"}, "positive integer"),
        ({"output_root": " "}, "output_root"),
    ],
)
def test_bad_spec_input(kwargs, match):
    with pytest.raises(InvalidPipelineSpecError, match=match):
        spec(**kwargs)


@pytest.mark.parametrize("name", ["", "../x", "a/b", "-x", "a b", "x" * 129, "é"])
def test_bad_pipeline_names(name):
    with pytest.raises(InvalidPipelineSpecError, match="invalid pipeline name"):
        build_spec(name, ["t"], "/tmp")


def test_templated_strings_are_accepted():
    s = build_spec("p", "b, a", "/tmp", max_records_per_batch="100", starting_offsets="latest")
    assert s.topics == ("a", "b") and s.max_records_per_batch == 100
    assert s.starting_offsets is StartPolicy.LATEST and s.on_data_loss is DataLossPolicy.FAIL


@given(st.lists(st.integers(0, 10_000), max_size=30), st.integers(0, 100_000))
def test_fair_shares_properties(needs, budget):
    shares = fair_shares(needs, budget)
    assert sum(shares) == min(budget, sum(needs))
    assert all(0 <= s <= n for s, n in zip(shares, needs))
    # max-min fair: a partition left short never has less than another partition's share minus one
    for s, n in zip(shares, needs):
        if s < n:
            assert all(s >= other - 1 for other in shares)
    assert fair_shares(needs, budget) == shares  # deterministic


partition_state = st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.one_of(st.none(), st.integers(0, 1200)))


@settings(max_examples=300)
@given(
    st.dictionaries(st.integers(0, 7), partition_state, min_size=1, max_size=8),
    st.sampled_from(["fail", "skip"]),
    st.one_of(st.none(), st.integers(1, 500)),
    st.one_of(st.none(), st.integers(1, 200)),
)
def test_plan_properties(parts, on_loss, total_cap, part_cap):
    offsets, cursors = {}, {}
    for p, (a, b, cursor) in parts.items():
        lo, hi = min(a, b), max(a, b)
        offsets[TP("t", p)] = PartitionOffsets(lo, hi)
        if cursor is not None:
            cursors[TP("t", p)] = cursor
    s = spec(on_data_loss=on_loss, max_records_per_batch=total_cap, max_records_per_partition=part_cap)
    try:
        ranges = plan_ranges(s, cursors, offsets)
    except OffsetOutOfRangeError:
        assert any(c > offsets[tp].latest for tp, c in cursors.items())
        return
    except DataLossError:
        assert on_loss == "fail" and any(c < offsets[tp].earliest for tp, c in cursors.items())
        return
    assert [r.topic_partition for r in ranges] == sorted(offsets)
    for r in ranges:
        kafka = offsets[r.topic_partition]
        cursor = cursors.get(r.topic_partition)
        # contiguity: a batch starts at the cursor, or records the span it skips
        if cursor is not None:
            assert r.cursor == cursor
            assert r.start == max(cursor, kafka.earliest)
        assert kafka.earliest <= r.start <= r.end <= kafka.latest
        if part_cap:
            assert r.span <= part_cap
    if total_cap:
        assert sum(r.span for r in ranges) <= total_cap
    if not total_cap and not part_cap:
        assert all(r.end == offsets[r.topic_partition].latest for r in ranges)


def test_decode_settings():
    s = spec(json_schema=" id STRING ", max_decode_errors="0")
    assert s.decode.schema == "id STRING" and s.decode.max_errors == 0
    assert spec().decode is None
    with pytest.raises(InvalidPipelineSpecError, match="needs a json_schema"):
        spec(max_decode_errors=3)
    with pytest.raises(InvalidPipelineSpecError, match="max_decode_errors must be a non-negative integer"):
        spec(json_schema="id STRING", max_decode_errors="-1")
    assert type(s).from_json(s.to_json()) == s
