"""HTML of the "Kafka pipelines" page (pure: values in, escaped markup out)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_kafka_offsets.core.history import RANGES, PipelineState
from airflow_kafka_offsets.plugins import charts as draw
from airflow_kafka_offsets.service.overview import (
    LAGGING_AFTER_S,
    PARTITIONS_PER_PAGE,
    RECENT_BATCHES,
    TREND_S,
    History,
    Overview,
    PipelineDetail,
    PipelineSummary,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1rem 1.5rem; color: #1a202c; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.15rem; margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border-bottom: 1px solid #e2e8f0; padding: .3rem .7rem; text-align: left; vertical-align: top; }
th { background: #f7fafc; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.lag { font-weight: 600; color: #c05621; } .ok { color: #2f855a; } .dead { color: #c53030; font-weight: 600; }
.note { color: #4a5568; font-size: .85rem; } nav a { margin-right: 1rem; }
.risk { color: #c53030; font-weight: 600; }
td.cause { color: #822727; font-family: monospace; max-width: 32rem; overflow-wrap: anywhere; }
td.error { max-width: 32rem; overflow-wrap: anywhere; font-size: .8rem; }
.problem { background: #fed7d7; color: #822727; padding: .4rem .7rem; border-radius: 4px; }
.state { border-radius: 9px; padding: .05rem .5rem; font-size: .8rem; font-weight: 600; white-space: nowrap; }
.healthy { background: #c6f6d5; color: #22543d; } .lagging { background: #feebc8; color: #7b341e; }
.failing, .data-at-risk { background: #fed7d7; color: #822727; }
.charts { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; } figure.chart { margin: 0; }
figcaption { font-size: .85rem; font-weight: 600; margin-bottom: .2rem; }
.ranges a, .ranges strong { margin-right: .8rem; }
"""


def _cell(value: Any, cls: str = "") -> str:
    text = "—" if value is None else escape(str(value))
    return f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>"


def _table(headers: Sequence[str], rows: Iterable[str], table_id: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def age(seconds: float | None) -> str | None:
    """3 s, 4 min 10 s, 2 h 5 min, 3 d 4 h."""
    if seconds is None:
        return None
    s = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if s >= size:
            return f"{s // size} {unit} {(s % size) // sub_size} {sub}"
    return f"{s} s"


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>{body}</body></html>"
    )


def _pager(page: int, pages: int, href: str) -> str:
    if pages <= 1:
        return ""
    links = []
    if page > 1:
        links.append(f'<a href="{href}page={page - 1}">previous</a>')
    links.append(f"page {page} of {pages}")
    if page < pages:
        links.append(f'<a href="{href}page={page + 1}">next</a>')
    return f'<nav class="pager">{" ".join(links)}</nav>'


def _trigger_link(trigger_url: str, pipeline: str) -> str:
    return (
        f'<a class="trigger" target="_top" href="{escape(trigger_url)}">manual operations</a>'
        f' <span class="note">(choose pipeline <code>{escape(pipeline)}</code> in the form)</span>'
    )


def _in_flight(summary: PipelineSummary) -> str:
    flight = summary.in_flight
    if flight is None:
        return "none"
    return f"batch {flight['batch_id']} since {flight['planned_at']} ({flight['records_planned']} records)"


def _lag(summary: PipelineSummary) -> tuple[str, str]:
    if summary.kafka_error is not None:
        return f"unknown: {summary.kafka_error}", ""
    return str(summary.lag_records), "num lag" if summary.lag_records else "num ok"


def _state(state: PipelineState) -> str:
    cls = state.value.replace(" ", "-")
    return f'<span class="state {cls}" data-state="{cls}">{escape(state.value)}</span>'


def _trend(summary: PipelineSummary) -> str:
    # From the first point of the day on: a pipeline younger than a day still shows a trend.
    start = summary.lag_trend[0].at if summary.lag_trend else summary.now - timedelta(seconds=TREND_S)
    return draw.sparkline(f"trend-{quote(summary.name, safe='')}", summary.lag_trend, start, summary.now)


def overview_page(view: Overview, pipeline_href: str, trigger_url: str) -> str:
    """Every pipeline (a page of them) with its lag, batch in flight, last batch and dead attempts."""
    rows = []
    for s in view.pipelines:
        last = s.last_batch
        lag, lag_cls = _lag(s)
        rows.append(
            f'<tr data-pipeline="{escape(s.name)}">'
            f'<td><a href="{pipeline_href}{quote(s.name, safe="")}">{escape(s.name)}</a></td>'
            + f"<td>{_state(s.state)}</td>"
            + _cell(", ".join(s.topics))
            + _cell(s.partitions, "num")
            + _cell(lag, lag_cls)
            + f"<td>{_trend(s)}</td>"
            + _cell(_in_flight(s))
            + _cell(f"{last['batch_id']} at {last['committed_at']}" if last else None)
            + _cell(s.dead_attempts, "num dead" if s.dead_attempts else "num")
            + f"<td>{_trigger_link(trigger_url, s.name)}</td></tr>"
        )
    body = (
        f'<h1>Kafka pipelines</h1><p class="note">{view.total} pipeline(s) in the ledger. Lag in records is '
        "Kafka's end offset (last stable offset) minus the ledger's cursor, summed over partitions; lag in "
        "time is on each pipeline's page. Trend: lag in records when each batch of the last day was planned, "
        "and now. State: <em>data at risk</em> when unread records are already deleted, <em>failing</em> "
        "when the batch in flight has a failed or dead attempt, <em>lagging</em> when the oldest unread "
        f"record may be older than {LAGGING_AFTER_S / 60:g} minutes. Dead attempts: among the last "
        f"{RECENT_BATCHES} batches.</p>"
        + _table(
            [
                "pipeline",
                "state",
                "topics",
                "partitions",
                "lag (records)",
                "lag, last day",
                "batch in flight",
                "last committed batch",
                "dead attempts",
                "",
            ],
            rows,
            "pipelines",
        )
        + _pager(view.page, view.pages, "?")
    )
    return _page("Kafka pipelines", body)


def _range_links(shown: str) -> str:
    links = [f"<strong>{name}</strong>" if name == shown else f'<a href="?range={name}">{name}</a>' for name in RANGES]
    return f'<p class="ranges">last {" ".join(links)}</p>'


def charts(h: History, problem: str | None = None) -> str:
    """Lag (records, age) over the range and each batch's records, bytes and seconds; ``problem``: what
    was wrong with the range asked for (shown above the ranges there are)."""
    asked = f'<p class="problem" id="range-problem" role="alert">{escape(problem)}</p>' if problem else ""
    return (
        f'<h2>Lag and batches</h2>{asked}{_range_links(h.range)}<p class="note">From the ledger\'s committed batches '
        "(the newest 1,000 of the range). Lag in records: when each batch was planned, the offsets it was "
        "planned over (at least the lag, when the pipeline caps a batch), and now. Age of the oldest unread "
        "record, at most: a batch reads every record produced before it was planned, so the age drops at "
        "each commit. Seconds: from plan to commit. Each batch's bar spans its plan to its commit.</p>"
        '<div class="charts">'
        + draw.line_chart("chart-lag-records", "Lag (records)", h.lag_records, h.start, h.now, draw.count)
        + draw.line_chart(
            "chart-lag-age", "Age of the oldest unread record (at most)", h.lag_age, h.start, h.now, draw.seconds
        )
        + draw.bar_chart("chart-records", "Records per batch", h.records, h.start, h.now, draw.count)
        + draw.bar_chart("chart-bytes", "Bytes per batch (Kafka payload)", h.bytes, h.start, h.now, draw.size)
        + draw.bar_chart("chart-seconds", "Seconds per batch (plan to commit)", h.seconds, h.start, h.now, draw.seconds)
        + "</div>"
    )


def pipeline_page(detail: PipelineDetail, overview_href: str, trigger_url: str, problem: str | None = None) -> str:
    """One pipeline: cursor and lag per partition (a page), recent batches with ranges, attempts;
    ``problem``: what was wrong with the range asked for, if anything."""
    s = detail.summary
    lag, _ = _lag(s)
    partitions = [
        f'<tr data-partition="{escape(p.topic)}-{p.partition}">'
        + _cell(p.topic)
        + _cell(p.partition, "num")
        + _cell(p.committed_offset, "num")
        + _cell(p.log_end_offset, "num")
        + _cell(p.lag_records, "num lag" if p.lag_records else "num ok")
        + _cell(age(p.lag_seconds), "num")
        + _cell(
            age(p.deletable_in_s), "num risk" if p.deletable_in_s is not None and p.deletable_in_s < 3600 else "num"
        )
        + "</tr>"
        for p in detail.partitions
    ]
    batches = []
    for line in detail.batches:
        b = line.batch
        ranges = ", ".join(
            f"{r.topic}-{r.partition} [{r.start}, {r.end})" + (f" skipping [{r.cursor}, {r.start})" if r.lost else "")
            for r in line.ranges
        )
        more = line.ranges_total - len(line.ranges)
        batches.append(
            f'<tr data-batch="{b["batch_id"]}">'
            + _cell(b["batch_id"], "num")
            + _cell(b["kind"])
            + _cell(b["state"])
            + _cell(b["records_planned"], "num")
            + _cell(b["records_committed"], "num")
            + _cell(b["committed_at"] or b["planned_at"])
            + _cell(ranges + (f" and {more} more" if more > 0 else ""))
            + "</tr>"
        )
    attempts = [
        f'<tr data-attempt="{escape(a["attempt_id"])}">'
        + _cell(a["attempt_id"][:12])
        + _cell(a["batch_id"], "num")
        + _cell(a["state"], "dead" if a["state"] == "dead" else "")
        + _cell(a["run_id"])
        + _cell(a["started_at"])
        + _cell(a["finished_at"] or a["lease_expires_at"])
        + _cell(a.get("root_cause"), "cause")
        + _cell(a["error"], "error")
        + "</tr>"
        for a in detail.attempts
    ]
    body = (
        f'<nav><a href="{overview_href}">all pipelines</a> {_trigger_link(trigger_url, s.name)}</nav>'
        f"<h1>Pipeline {escape(s.name)} {_state(s.state)}</h1>"
        f'<p id="summary">topics {escape(", ".join(s.topics))}; {s.partitions} partition(s); '
        f'lag <span id="total-lag">{escape(lag)}</span> records; batch in flight: '
        f'<span id="in-flight">{escape(_in_flight(s))}</span>; dead attempts: {s.dead_attempts}</p>'
        + charts(detail.history, problem)
        + f'<h2>Partitions</h2><p class="note">Cursor: the next offset to ingest. Lag in time: age of the oldest '
        f"unread record, looked up for the {PARTITIONS_PER_PAGE} partitions of this page only.</p>"
        + _table(
            ["topic", "partition", "cursor", "log end", "lag (records)", "lag (time)", "retention may delete in"],
            partitions,
            "partitions",
        )
        + _pager(detail.page, detail.pages, "?")
        + f'<h2>Recent batches</h2><p class="note">The last {RECENT_BATCHES}; ranges are [start, end). A reset '
        "records the cursor it set as an empty range, after the span it skipped.</p>"
        + _table(["batch", "kind", "state", "planned", "committed", "at", "ranges"], batches, "batches")
        + '<h2>Spark attempts of these batches</h2><p class="note">Root cause: the innermost error Spark\'s '
        "output named for a failed attempt (its last <code>Caused by:</code>); the error is what the task "
        "raised.</p>"
        + _table(
            ["attempt", "batch", "state", "run", "started", "ended / lease until", "root cause", "error"],
            attempts,
            "attempts",
        )
    )
    return _page(f"Kafka pipeline {s.name}", body)


def not_found_page(message: str, overview_href: str) -> str:
    return _page(
        "Kafka pipelines", f'<nav><a href="{escape(overview_href)}">all pipelines</a></nav><p>{escape(message)}</p>'
    )
