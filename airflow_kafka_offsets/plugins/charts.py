"""Inline SVG charts for the "Kafka pipelines" page, drawn on the server (pure: points in, markup out).

No script and nothing fetched: the page stays one HTML document inside Airflow's frame. Every
drawn point carries its numbers (``data-batch``, ``data-value``, ``data-at``, and ``data-since``
for a bar spanning a batch's plan to its commit) and a tooltip, so a reader (or a test) can check a
chart against the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from airflow_kafka_offsets.core.history import Point, Scale

WIDTH, HEIGHT = 520, 140
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 10, 22
LINE = "#017cee"  # Airflow's blue
BAR = "#4a5568"

Format = Callable[[float], str]


def count(value: float) -> str:
    return f"{int(value):,}"


def size(value: float) -> str:
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= factor:
            return f"{value / factor:.1f} {unit}"
    return f"{int(value)} B"


def seconds(value: float) -> str:
    s = int(value)
    if s >= 3600:
        return f"{s // 3600} h {(s % 3600) // 60} min"
    if s >= 60:
        return f"{s // 60} min {s % 60} s"
    return f"{value:.1f} s" if value < 10 else f"{s} s"


def number(value: float) -> str:
    """A value exactly as the ledger gave it: whole numbers without a point, seconds to the millisecond."""
    return str(int(value)) if float(value).is_integer() else str(round(value, 3))


def _attrs(p: Point, fmt: Format) -> str:
    batch = "" if p.batch_id is None else str(p.batch_id)
    label = f"batch {batch}" if batch else "now"
    since = "" if p.since is None else f' data-since="{p.since.isoformat()}"'
    return (
        f'data-batch="{batch}" data-value="{number(p.value)}" data-at="{p.at.isoformat()}"{since}'
        f"><title>{escape(label)} at {p.at:%Y-%m-%d %H:%M:%S}: {escape(fmt(p.value))}</title"
    )


def _frame(chart_id: str, title: str, start: datetime, end: datetime, top: str, body: str) -> str:
    plot_h = HEIGHT - TOP - BOTTOM
    axis = (
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" stroke="#a0aec0"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#a0aec0"/>'
        f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{escape(top)}</text>'
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end">0</text>'
        f'<text x="{LEFT}" y="{HEIGHT - 6}">{start:%m-%d %H:%M}</text>'
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 6}" text-anchor="end">{end:%m-%d %H:%M} UTC</text>'
    )
    return (
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
        f'<svg id="{chart_id}" role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{HEIGHT}"'
        f' viewBox="0 0 {WIDTH} {HEIGHT}" font-size="10" fill="#4a5568">{axis}{body}</svg></figure>'
    )


def _scales(points: Sequence[Point], start: datetime, end: datetime) -> tuple[Scale, Scale]:
    x = Scale(start.timestamp(), end.timestamp(), WIDTH - LEFT - RIGHT)
    y = Scale.of([p.value for p in points], HEIGHT - TOP - BOTTOM)
    return x, y


def line_chart(chart_id: str, title: str, points: Sequence[Point], start: datetime, end: datetime, fmt: Format) -> str:
    """A line through ``points`` with a dot on each, over the time window [start, end]."""
    x, y = _scales(points, start, end)
    base = HEIGHT - BOTTOM
    xy = [(LEFT + x(p.at.timestamp()), base - y(p.value)) for p in points]
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
    dots = "".join(
        f'<circle class="point" cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{LINE}" {_attrs(p, fmt)}></circle>'
        for p, (a, b) in zip(points, xy)
    )
    empty = "" if points else _nothing()
    body = f'<polyline points="{line}" fill="none" stroke="{LINE}" stroke-width="1.5"/>{dots}{empty}'
    return _frame(chart_id, title, start, end, fmt(y.high), body)


MIN_BAR = 1.0  # px: a batch shorter than a pixel is still drawn, unless that would reach the next one
GAP = 1.0  # px left free before the next bar, so back-to-back batches do not merge into one block


@dataclass(frozen=True)
class Bar:
    """Where a point's bar goes, in pixels from the plot's left edge."""

    left: float
    width: float


def bar_geometry(points: Sequence[Point], start: datetime, end: datetime, pixels: float) -> list[Bar]:
    """Bars placed and sized by time: each spans its point's ``since`` to ``at`` (a batch's plan to its
    commit) on the window [start, end] drawn ``pixels`` wide, so the widths are in proportion to the
    durations and batches that did not overlap in time do not overlap on the chart.

    A bar narrower than :data:`MIN_BAR` is widened to it, but never past half the room before the next
    bar's start (or the plot's end); a bar ends :data:`GAP` (at most a quarter of that room) before the
    next one starts. Bars of batches a minute apart, or back to back, stay apart at any range.
    """
    span = (end - start).total_seconds()
    scale = pixels / span if span > 0 else 0.0

    def px(at: datetime) -> float:
        return min(pixels, max(0.0, (at - start).total_seconds() * scale))

    edges = [(px(p.since or p.at), px(p.at)) for p in points]
    bars = []
    for i, (left, right) in enumerate(edges):
        last = i + 1 == len(edges)
        room = (pixels if last else edges[i + 1][0]) - left
        natural = right - left
        width = natural if natural >= MIN_BAR else max(natural, min(MIN_BAR, room / 2))
        if not last:
            width = min(width, room - min(GAP, room / 4))
        bars.append(Bar(left, width))
    return bars


def bar_chart(chart_id: str, title: str, points: Sequence[Point], start: datetime, end: datetime, fmt: Format) -> str:
    """One bar per point, from its ``since`` to its time (see :func:`bar_geometry`), over [start, end]."""
    _, y = _scales(points, start, end)
    base = HEIGHT - BOTTOM
    geometry = bar_geometry(points, start, end, WIDTH - LEFT - RIGHT)
    bars = "".join(
        f'<rect class="point" x="{LEFT + g.left:.3f}" y="{base - y(p.value):.1f}"'
        f' width="{g.width:.3f}" height="{y(p.value):.1f}" fill="{BAR}" {_attrs(p, fmt)}></rect>'
        for p, g in zip(points, geometry)
    )
    return _frame(chart_id, title, start, end, fmt(y.high), bars + ("" if points else _nothing()))


def _nothing() -> str:
    return f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no committed batch in this range</text>'


def sparkline(chart_id: str, points: Sequence[Point], start: datetime, end: datetime) -> str:
    """A small line of ``points`` for the overview (120 x 24), the values in ``data-values``."""
    width, height = 120, 24
    x = Scale(start.timestamp(), end.timestamp(), width - 4)
    y = Scale.of([p.value for p in points], height - 4)
    line = " ".join(f"{2 + x(p.at.timestamp()):.1f},{height - 2 - y(p.value):.1f}" for p in points)
    values = " ".join(number(p.value) for p in points)
    return (
        f'<svg class="sparkline" id="{chart_id}" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f' data-values="{values}" role="img" aria-label="lag in records, last day">'
        f'<polyline points="{line}" fill="none" stroke="{LINE}" stroke-width="1.5"/></svg>'
    )
