"""The Kafka pipelines plugin as Airflow finds it, and the page's HTML (pure rendering)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points

from airflow_kafka_offsets.core.history import PipelineState, Point
from airflow_kafka_offsets.core.model import PartitionRange
from airflow_kafka_offsets.plugins.pipelines_page import age, overview_page, pipeline_page
from airflow_kafka_offsets.service.overview import (
    BatchLine,
    History,
    Overview,
    PipelineDetail,
    PipelineSummary,
)
from airflow_kafka_offsets.service.status import PartitionStatus

NOW = datetime(2026, 11, 22, 5, 1, tzinfo=UTC)
EVIL = '<script>alert("x")</script>'


def summary(name: str = "orders", **changes) -> PipelineSummary:
    values = {
        "name": name,
        "topics": ("orders",),
        "partitions": 2,
        "lag_records": 7,
        "kafka_error": None,
        "in_flight": {"batch_id": 4, "planned_at": "2026-11-22T05:00:00+00:00", "records_planned": 9},
        "last_batch": {"batch_id": 3, "committed_at": "2026-11-22T04:59:00+00:00", "state": "committed"},
        "dead_attempts": 1,
        "state": PipelineState.FAILING,
        "lag_trend": (Point(NOW - timedelta(hours=2), 3, 2), Point(NOW, 7, None)),
        "now": NOW,
    }
    values.update(changes)
    return PipelineSummary(**values)


def test_the_installed_package_registers_the_plugin_with_its_app_and_navigation_entry():
    (entry,) = [e for e in entry_points(group="airflow.plugins") if e.value.startswith("airflow_kafka_offsets.")]
    plugin = entry.load()
    (app,) = plugin.fastapi_apps
    (view,) = plugin.external_views
    assert app["url_prefix"] == "/kafka-pipelines" and view["href"] == "/kafka-pipelines/"
    assert view["destination"] == "nav" and view["url_route"] == "kafka-pipelines"
    # every route sits behind Airflow's authentication dependency (the app-level one)
    assert [d.dependency.__qualname__ for d in app["app"].router.dependencies] == ["requires_access_dag.<locals>.inner"]


def test_age_reads_as_units():
    assert [age(None), age(0.4), age(59), age(61), age(3725), age(2 * 86400 + 3600)] == [
        None,
        "0 s",
        "59 s",
        "1 min 1 s",
        "1 h 2 min",
        "2 d 1 h",
    ]


def test_names_from_the_ledger_are_escaped():
    html = overview_page(Overview((summary(EVIL, topics=(EVIL,)),), 1, 1, 1), "pipelines/", "/dags/x")
    assert EVIL not in html and "&lt;script&gt;" in html
    assert 'href="pipelines/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"' in html


def test_pipeline_page_shows_ranges_skips_and_the_rest_of_a_wide_batch():
    ranges = (PartitionRange("orders", 0, start=10, end=15, cursor=8), PartitionRange("orders", 1, 5, 9, 5))
    batch = {
        "batch_id": 3,
        "kind": "ingest",
        "state": "committed",
        "records_planned": 9,
        "records_committed": 9,
        "committed_at": "t",
        "planned_at": "t0",
    }
    detail = PipelineDetail(
        summary(),
        (PartitionStatus("orders", 0, 15, 0, 20, 5, 3.0), PartitionStatus("orders", 1, 9, 0, 11, 2, None)),
        1,
        3,
        (BatchLine(batch, ranges, 30),),
        (),
        History("day", NOW - timedelta(days=1), NOW, (), (), (), (), ()),
    )
    html = pipeline_page(detail, "../", "/dags/kafka_offsets_manual_ops")
    assert "orders-0 [10, 15) skipping [8, 10), orders-1 [5, 9) and 28 more" in html
    assert 'id="total-lag">7<' in html
    assert "page 1 of 3" in html and 'href="?page=2"' in html
    assert 'target="_top" href="/dags/kafka_offsets_manual_ops"' in html


def test_an_unreachable_kafka_is_said_instead_of_a_lag():
    html = overview_page(
        Overview((summary(lag_records=None, kafka_error="topic 'orders' not found"),), 1, 1, 1), "p/", "/d"
    )
    assert "unknown: topic &#x27;orders&#x27; not found" in html


def test_overview_shows_each_pipelines_state_and_lag_trend():
    html = overview_page(Overview((summary(),), 1, 1, 1), "p/", "/d")
    assert '<span class="state failing" data-state="failing">failing</span>' in html
    assert '<svg class="sparkline" id="trend-orders"' in html and 'data-values="3 7"' in html


def test_charts_carry_each_points_batch_and_value_and_say_when_a_range_is_empty():
    batch_at = NOW - timedelta(minutes=30)
    history = History(
        "hour",
        NOW - timedelta(hours=1),
        NOW,
        (Point(batch_at, 12, 5), Point(NOW, 4, None)),
        (),
        (Point(batch_at, 12, 5),),
        (Point(batch_at, 2048, 5),),
        (Point(batch_at, 1.5, 5),),
    )
    detail = PipelineDetail(summary(), (), 1, 1, (), (), history)
    html = pipeline_page(detail, "../", "/d")
    assert '<strong>hour</strong> <a href="?range=day">day</a> <a href="?range=week">week</a>' in html
    assert f'data-batch="5" data-value="12" data-at="{batch_at.isoformat()}"' in html
    assert 'data-batch="" data-value="4" data-at="2026-11-22T05:01:00+00:00"><title>now at' in html
    assert "<title>batch 5 at 2026-11-22 04:31:00: 2.0 kB</title>" in html
    assert html.count("no committed batch in this range") == 1  # the age chart


def test_an_unknown_range_is_said_above_the_ranges_there_are():
    history = History("day", NOW - timedelta(days=1), NOW, (), (), (), (), ())
    detail = PipelineDetail(summary(), (), 1, 1, (), (), history)
    html = pipeline_page(detail, "../", "/d", f"unknown range {EVIL!r}: choose one of hour, day, week")
    assert EVIL not in html
    assert (
        '<p class="problem" id="range-problem" role="alert">unknown range &#x27;&lt;script&gt;alert(&quot;x&quot;)'
        "&lt;/script&gt;&#x27;: choose one of hour, day, week</p>"
        '<p class="ranges">last <a href="?range=hour">hour</a> <strong>day</strong> <a href="?range=week">week</a>'
    ) in html
    assert 'id="range-problem"' not in pipeline_page(detail, "../", "/d")


def test_a_failed_attempt_shows_its_root_cause_beside_its_error():
    history = History("day", NOW - timedelta(days=1), NOW, (), (), (), (), ())
    failed = {
        "attempt_id": "a" * 32,
        "batch_id": 4,
        "state": "failed",
        "run_id": "scheduled__1",
        "started_at": "2026-11-22T05:00:00+00:00",
        "finished_at": "2026-11-22T05:00:30+00:00",
        "lease_expires_at": None,
        "error": "SparkJobError: Spark job for batch 4 of pipeline 'orders' failed: spark-submit exited with code 1",
        "root_cause": "java.io.IOException: Mkdirs failed to create file:/out/x",
    }
    older = {**failed, "attempt_id": "b" * 32, "root_cause": None}  # recorded before root causes were kept
    html = pipeline_page(PipelineDetail(summary(), (), 1, 1, (), (failed, older), history), "../", "/d")
    assert "<th>root cause</th><th>error</th>" in html
    cause = "java.io.IOException: Mkdirs failed to create file:/out/x"
    assert f'<td class="cause">{cause}</td><td class="error">SparkJobError' in html
    assert '<td class="cause">—</td><td class="error">SparkJobError' in html
