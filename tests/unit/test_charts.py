"""Bar geometry of the pipelines page's charts (pure): bars placed and sized by time."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_offsets.core.history import RANGES, Point
from airflow_kafka_offsets.plugins.charts import GAP, LEFT, MIN_BAR, RIGHT, WIDTH, Bar, bar_chart, bar_geometry, count

NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
PLOT = WIDTH - LEFT - RIGHT


def batches_a_minute_apart(durations: list[float]) -> list[Point]:
    """Batches planned 60 s apart (the last ends just before now), each taking its duration."""
    n = len(durations)
    plans = [NOW - timedelta(seconds=60 * (n - i)) for i in range(n)]
    return [
        Point(plan + timedelta(seconds=d), 10 * (i + 1), i + 1, plan)
        for i, (plan, d) in enumerate(zip(plans, durations))
    ]


@pytest.mark.parametrize("range_name", list(RANGES))
def test_bars_of_batches_a_minute_apart_never_overlap_and_follow_their_durations(range_name):
    durations = [10.0, 20.0, 40.0, 50.0, 15.0, 30.0, 59.0, 5.0]
    points = batches_a_minute_apart(durations)
    start = NOW - timedelta(seconds=RANGES[range_name])
    bars = bar_geometry(points, start, NOW, PLOT)
    px_per_s = PLOT / RANGES[range_name]
    for i, (point, bar) in enumerate(zip(points, bars)):
        assert bar.left == pytest.approx((point.since - start).total_seconds() * px_per_s)  # at its plan
        natural = durations[i] * px_per_s
        room = (bars[i + 1].left if i + 1 < len(bars) else PLOT) - bar.left
        # as wide as the batch took, or widened to MIN_BAR within half the room before the next bar,
        # ending a GAP (at most a quarter of the room) before the next one
        drawn = natural if natural >= MIN_BAR else max(natural, min(MIN_BAR, room / 2))
        if i + 1 < len(bars):
            drawn = min(drawn, room - min(GAP, room / 4))
            assert bar.left + bar.width < bars[i + 1].left  # never touching, never overlapping
        assert bar.width == pytest.approx(drawn)
    if range_name == "hour":  # wide enough for each batch's own width: widths in proportion to durations
        # (but the 59-s batch, cut to leave the gap, and the 5-s one, widened to a pixel)
        shown = [(b.width, d) for b, d in zip(bars, durations) if d not in (59.0, 5.0)]
        assert [w / shown[0][0] for w, _ in shown] == pytest.approx([d / shown[0][1] for _, d in shown])
        assert bars[6].width == pytest.approx(60 * px_per_s - GAP) and bars[7].width == MIN_BAR


def test_bars_of_back_to_back_batches_keep_a_gap():
    # catch-up: each batch planned the moment its predecessor committed, 3 minutes each
    plans = [NOW - timedelta(minutes=3 * k) for k in (3, 2, 1)]
    points = [Point(p + timedelta(minutes=3), 1, i, p) for i, p in enumerate(plans)]
    bars = bar_geometry(points, NOW - timedelta(hours=1), NOW, PLOT)
    full = 180 * PLOT / 3600
    assert [b.width for b in bars] == pytest.approx([full - GAP, full - GAP, full])
    assert all(a.left + a.width + GAP == pytest.approx(b.left) for a, b in itertools.pairwise(bars))


def test_a_bar_that_began_before_the_range_is_cut_at_its_start_and_an_instant_gets_a_visible_bar():
    start = NOW - timedelta(hours=1)
    early = Point(start + timedelta(minutes=1), 5, 1, start - timedelta(minutes=1))
    instant = Point(NOW - timedelta(minutes=30), 5, 2)  # no span: a minimal bar at its time
    bars = bar_geometry([early, instant], start, NOW, PLOT)
    assert bars[0] == Bar(0.0, pytest.approx(60 * PLOT / 3600))
    assert bars[1] == Bar(pytest.approx(PLOT / 2), MIN_BAR)


def test_bar_chart_draws_each_bar_from_plan_to_commit():
    points = batches_a_minute_apart([30.0, 15.0])
    html = bar_chart("c", "Records", points, NOW - timedelta(hours=1), NOW, count)
    px_per_s = PLOT / 3600
    first_left = LEFT + (3600 - 120) * px_per_s
    assert f'x="{first_left:.3f}"' in html and f'width="{30 * px_per_s:.3f}"' in html
    assert f'width="{15 * px_per_s:.3f}"' in html
