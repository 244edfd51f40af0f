"""The "Kafka pipelines" page the provider adds to Airflow's UI, on the real deployment.

The lagging pipeline is set up through the ledger and Kafka only (no Spark): created, its cursors
reset to offset 3, then 6 more records arrive and a batch is planned and left in flight with a dead
Spark attempt. The charted pipeline commits three batches of different sizes on Spark Connect,
then 5 more records arrive. The failing pipeline's read fails on Spark (its output root lies under
a regular file). The page must show exactly that, charts drawn from the ledger's rows, the failed
attempt's root cause, and only to a logged-in user.
"""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.request
import uuid
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.errors
import pytest
from selenium.webdriver.common.by import By

import devstack
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.plugins.charts import LEFT, RIGHT, WIDTH
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.sinks.local import STAGING_DIR

from .helpers import produce
from .pipeline import ACTOR, operation_context, plan, read, run_once
from .test_manual_ops_ui import SCREENSHOTS, login, nav_item, wait_until

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


class _Tables(HTMLParser):
    """The text of every cell of every ``<table id=...>``, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return {name: rows[1:] for name, rows in parser.tables.items()}  # without the header row


def get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def lagging_pipeline(stack, airflow_ui, kafka_admin_module) -> tuple[str, str, int, str]:
    """(pipeline, topic, in-flight batch id, dead attempt id) in the deployment's ledger schema; see the module doc."""
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=airflow_ui["ledger_schema"])
    ledger.migrate()
    topic = kafka_admin_module(partitions=2)
    spec = build_spec(f"page_{uuid.uuid4().hex[:8]}", [topic], "/tmp/ako-page-test-output")
    produce(stack.bootstrap_servers, topic, 10, partitions=2)
    with ledger.transaction() as tx:
        tx.lock_pipeline(spec)
    ctx = operation_context(ledger, stack)
    reset = reset_offsets(ctx, spec.name, ResetRequest(ResetMode.TO_OFFSET, offset=3), dry_run=False)
    assert reset.batch_id == 1
    produce(stack.bootstrap_servers, topic, 6, partitions=2)
    planned = plan(ledger, spec, stack).plan
    attempt_id = uuid.uuid4().hex
    assert planned is not None and planned.batch_id == 2
    with ledger.transaction() as tx:
        tx.start_attempt(planned, attempt_id, "file:///tmp/ako-page-test-staging", ACTOR, lease_s=0.01)
    assert ledger.cursors(spec.name) == {TP(topic, 0): 3, TP(topic, 1): 3}
    time.sleep(0.1)  # the attempt's lease runs out: it is dead
    return spec.name, topic, planned.batch_id, attempt_id


@pytest.fixture(scope="module")
def charted_pipeline(stack, airflow_ui, kafka_admin_module, tmp_path_factory) -> tuple[str, str]:
    """(pipeline, topic): committed batches of 12 and 30 records over 3 partitions, then 5 unread."""
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=airflow_ui["ledger_schema"])
    ledger.migrate()
    topic = kafka_admin_module(partitions=3)
    spec = build_spec(f"charts_{uuid.uuid4().hex[:8]}", [topic], str(tmp_path_factory.mktemp("charts-out")))
    for count in (12, 30):
        produce(stack.bootstrap_servers, topic, count, partitions=3)
        assert run_once(ledger, spec, stack) is not None
    produce(stack.bootstrap_servers, topic, 5, partitions=3)
    return spec.name, topic


@pytest.fixture(scope="module")
def failing_pipeline(stack, airflow_ui, kafka_admin_module, tmp_path_factory) -> tuple[str, str, str]:
    """(pipeline, failed attempt id, the regular file in the way): a planned batch whose read failed on
    Spark, because a regular file stands where Spark writes the batch's staging (the output root itself
    is writable, so the read gets as far as Spark)."""
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=airflow_ui["ledger_schema"])
    ledger.migrate()
    topic = kafka_admin_module(partitions=1)
    root = tmp_path_factory.mktemp("failing")
    spec = build_spec(f"failing_{uuid.uuid4().hex[:8]}", [topic], str(root))
    blocker = root / STAGING_DIR / spec.name
    blocker.parent.mkdir()
    blocker.write_text("not a directory")
    produce(stack.bootstrap_servers, topic, 4, partitions=1)
    outcome = plan(ledger, spec, stack)
    with pytest.raises(SparkJobError):
        read(ledger, spec, stack, outcome)
    with ledger.transaction() as tx:
        (attempt,) = tx.attempts(spec.name, [1])  # as the page reads them: the batch steps' read has no root cause
    assert attempt.state == "failed" and attempt.root_cause, attempt
    return spec.name, attempt.attempt_id, str(blocker)


def ledger_history(stack, schema: str, pipeline: str) -> list[tuple]:
    """Per committed ingest batch, read straight from the ledger's tables: (batch, plan time, offsets
    planned from the cursor, records, payload bytes, seconds from plan to commit)."""
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            f"SELECT b.batch_id, b.planned_at, sum(r.end_offset - r.cursor_offset), b.records_committed,"
            f" sum(r.payload_bytes), extract(epoch FROM b.committed_at - b.planned_at)"
            f' FROM "{schema}".batches b JOIN "{schema}".batch_ranges r USING (pipeline, batch_id)'
            f" WHERE b.pipeline = %s AND b.state = 'committed' AND b.kind = 'ingest'"
            f" GROUP BY b.pipeline, b.batch_id ORDER BY b.batch_id",
            (pipeline,),
        )
        return cur.fetchall()


class _Points(HTMLParser):
    """``(data-batch, data-value, data-at)`` of the drawn points of each chart (``<svg id=...>``)."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, list[tuple[str, float, str]]] = {}
        self._chart: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg":
            self._chart = a.get("id") or ""
            self.charts[self._chart] = []
        elif self._chart is not None and "data-value" in a:
            self.charts[self._chart].append((a["data-batch"] or "", float(a["data-value"] or 0), a["data-at"] or ""))


def chart_points(html: str) -> dict[str, list[tuple[str, float, str]]]:
    parser = _Points()
    parser.feed(html)
    return parser.charts


@pytest.fixture(scope="module")
def kafka_admin_module(stack):
    """make_topic for a module-scoped fixture."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})

    def create(partitions: int) -> str:
        name = f"page-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
        return name

    return create


def test_page_is_refused_without_a_valid_airflow_token(airflow_ui, lagging_pipeline):
    pipeline, _, _, _ = lagging_pipeline
    for path in ("/kafka-pipelines/", f"/kafka-pipelines/pipelines/{pipeline}"):
        status, body = get(airflow_ui["url"] + path)
        assert status == 401, body
        assert pipeline not in body
        status, body = get(airflow_ui["url"] + path, token="not-a-token")
        assert status == 403, body
        assert pipeline not in body


def test_page_shows_cursors_lag_batch_in_flight_and_dead_attempts(airflow_ui, lagging_pipeline):
    pipeline, topic, in_flight, attempt_id = lagging_pipeline
    token = devstack.airflow.token(airflow_ui)

    status, html = get(f"{airflow_ui['url']}/kafka-pipelines/", token)
    assert status == 200, html
    (row,) = [r for r in tables(html)["pipelines"] if r[0] == pipeline]
    assert [row[1], row[2], row[3], row[4], row[8]] == ["failing", topic, "2", "10", "1"]  # a dead attempt
    assert row[6].startswith(f"batch {in_flight} since ") and row[6].endswith("(10 records)")
    assert row[7].startswith("1 at ")

    status, html = get(f"{airflow_ui['url']}/kafka-pipelines/pipelines/{pipeline}", token)
    assert status == 200, html
    page = tables(html)
    assert [r[:5] for r in page["partitions"]] == [[topic, "0", "3", "8", "5"], [topic, "1", "3", "8", "5"]]
    assert all(re.fullmatch(r"\d+ (s|min \d+ s)", r[5]) for r in page["partitions"]), page["partitions"]
    assert [r[:5] + r[6:] for r in page["batches"]] == [
        ["2", "ingest", "planned", "10", "—", f"{topic}-0 [3, 8), {topic}-1 [3, 8)"],
        ["1", "reset", "committed", "0", "0", f"{topic}-0 [3, 3), {topic}-1 [3, 3)"],  # from no cursor
    ]
    assert [r[:4] for r in page["attempts"]] == [[attempt_id[:12], "2", "dead", "manual"]]
    assert 'id="total-lag">10<' in html
    assert f"batch {in_flight} since " in html

    status, html = get(f"{airflow_ui['url']}/kafka-pipelines/pipelines/no_such_pipeline", token)
    assert status == 404 and "pipeline 'no_such_pipeline' is not in the ledger" in unescape(html)


def test_page_opens_from_airflow_navigation_in_the_browser(airflow_ui, browser, lagging_pipeline):
    pipeline, topic, in_flight, _ = lagging_pipeline
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(browser, airflow_ui)
    browser.get(f"{airflow_ui['url']}/")
    browser.find_element(By.CSS_SELECTOR, nav_item("a", "Kafka pipelines")).click()  # in the side navigation
    wait_until(lambda: "/plugin/kafka-pipelines" in browser.current_url, "the plugin page")
    frame = wait_until(lambda: browser.find_elements(By.TAG_NAME, "iframe"), "the page's frame")[0]
    browser.switch_to.frame(frame)
    try:
        browser.find_element(By.LINK_TEXT, pipeline).click()
        wait_until(lambda: "Partitions" in browser.find_element(By.TAG_NAME, "body").text, "the pipeline's page")
        cells = [
            [c.text for c in row.find_elements(By.TAG_NAME, "td")][:5]
            for row in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")
        ]
        assert cells == [[topic, "0", "3", "8", "5"], [topic, "1", "3", "8", "5"]]
        assert browser.find_element(By.ID, "total-lag").text == "10"
        assert browser.find_element(By.ID, "in-flight").text.startswith(f"batch {in_flight} since ")
        bottom = content_bottom(browser)
    finally:
        browser.switch_to.default_content()
    save_top(browser, SCREENSHOTS / "pipelines_page.png", frame.rect["y"] + int(bottom) + 24)


def test_charts_are_the_ledgers_history(airflow_ui, charted_pipeline, stack):
    pipeline, _ = charted_pipeline
    token = devstack.airflow.token(airflow_ui)
    rows = ledger_history(stack, airflow_ui["ledger_schema"], pipeline)
    assert [(r[0], r[2], r[3]) for r in rows] == [(1, 12, 12), (2, 30, 30)]  # a plan takes all there is

    status, html = get(f"{airflow_ui['url']}/kafka-pipelines/pipelines/{pipeline}?range=hour", token)
    assert status == 200, html
    charts = chart_points(html)
    at = {str(r[0]): r[1].isoformat() for r in rows}
    # lag in records: each batch's plan, then Kafka's lag now (the 5 records produced since)
    assert charts["chart-lag-records"][:-1] == [(str(b), float(offsets), at[str(b)]) for b, _, offsets, *_ in rows]
    assert charts["chart-lag-records"][-1][:2] == ("", 5.0)
    # per batch: records, payload bytes and seconds from plan to commit, exactly the ledger's
    assert [p[:2] for p in charts["chart-records"]] == [(str(r[0]), float(r[3])) for r in rows]
    assert [p[:2] for p in charts["chart-bytes"]] == [(str(r[0]), float(r[4])) for r in rows]
    assert all(r[4] > 0 for r in rows)
    assert [(b, round(v, 3)) for b, v, _ in charts["chart-seconds"]] == [
        (str(r[0]), round(float(r[5]), 3)) for r in rows
    ]
    # age of the oldest unread record, at most: at batch k's commit, since batch k-1's and k's plans
    ages = [(b, v) for b, v, _ in charts["chart-lag-age"]]
    assert [b for b, _ in ages] == ["1", "2", "2", ""]
    assert ages[0][1] == round(float(rows[0][5]), 3) and ages[2][1] == round(float(rows[1][5]), 3)
    assert ages[1][1] == round((rows[1][1] - rows[0][1]).total_seconds() + float(rows[1][5]), 3)

    status, html = get(f"{airflow_ui['url']}/kafka-pipelines/", token)
    (row,) = [r for r in tables(html)["pipelines"] if r[0] == pipeline]
    assert [row[1], row[4]] == ["healthy", "5"]  # 5 unread, but none older than the last plan of seconds ago
    assert f'id="trend-{pipeline}"' in html and 'data-values="12 30 5"' in html

    status, html = get(f"{airflow_ui['url']}/kafka-pipelines/pipelines/{pipeline}?range=year", token)
    assert status == 400, html  # hour, day or week only: said on the page, over the default day
    assert "unknown range 'year': choose one of hour, day, week (shown: the last day)" in unescape(html)
    assert '<a href="?range=hour">hour</a> <strong>day</strong> <a href="?range=week">week</a>' in html
    assert [p[:2] for p in chart_points(html)["chart-records"]] == [(str(r[0]), float(r[3])) for r in rows]


def test_charts_in_the_browser(airflow_ui, browser, charted_pipeline, lagging_pipeline, stack):
    pipeline, _ = charted_pipeline
    rows = ledger_history(stack, airflow_ui["ledger_schema"], pipeline)
    frame = open_plugin(browser, airflow_ui)
    browser.switch_to.frame(frame)
    try:
        wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, f'svg[id="trend-{pipeline}"]'), "the lag trend")
        states = {
            r.get_attribute("data-pipeline"): r.find_element(By.CSS_SELECTOR, ".state").text
            for r in browser.find_elements(By.CSS_SELECTOR, "#pipelines tbody tr")
        }
        assert states[pipeline] == "healthy" and states[lagging_pipeline[0]] == "failing"
        bottom = content_bottom(browser)
    finally:
        browser.switch_to.default_content()
    save_top(browser, SCREENSHOTS / "pipelines_overview.png", frame.rect["y"] + int(bottom) + 24)

    browser.switch_to.frame(frame)
    try:
        browser.find_element(By.LINK_TEXT, pipeline).click()
        wait_until(lambda: browser.find_elements(By.ID, "chart-records"), "the charts")
        browser.find_element(By.LINK_TEXT, "hour").click()
        wait_until(
            lambda: (
                browser.find_elements(By.CSS_SELECTOR, ".ranges strong")
                and browser.find_element(By.CSS_SELECTOR, ".ranges strong").text == "hour"
            ),
            "the hour's charts",
        )
        bars = browser.find_elements(By.CSS_SELECTOR, "#chart-records rect.point")
        assert [(b.get_attribute("data-batch"), b.get_attribute("data-value")) for b in bars] == [
            (str(r[0]), str(r[3])) for r in rows
        ]
        assert all(b.size["height"] > 0 and b.size["width"] > 0 for b in bars)  # drawn, not only in the markup
        # placed by time: each bar starts at its plan, and batches seconds apart never overlap on screen
        boxes = [browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", b) for b in bars]
        px_per_s = (WIDTH - LEFT - RIGHT) / 3600  # the hour's scale (the SVG is drawn at its own size)
        assert [b.get_attribute("data-since") for b in bars] == [r[1].isoformat() for r in rows]
        apart_s = (rows[1][1] - rows[0][1]).total_seconds()
        assert boxes[1]["x"] - boxes[0]["x"] == pytest.approx(apart_s * px_per_s, abs=0.6)
        assert boxes[0]["x"] + boxes[0]["width"] < boxes[1]["x"]
        charts = browser.find_element(By.CSS_SELECTOR, ".charts")
        bottom = charts.rect["y"] + charts.rect["height"]
    finally:
        browser.switch_to.default_content()
    save_top(browser, SCREENSHOTS / "pipelines_charts.png", frame.rect["y"] + int(bottom) + 24)


def test_a_failing_pipelines_page_shows_the_root_cause_and_an_unknown_range_in_the_browser(
    airflow_ui, browser, failing_pipeline
):
    pipeline, attempt_id, blocker = failing_pipeline
    frame = open_plugin(browser, airflow_ui)
    browser.switch_to.frame(frame)
    try:
        wait_until(lambda: browser.find_elements(By.LINK_TEXT, pipeline), "the failing pipeline's row")[0].click()
        wait_until(lambda: browser.find_elements(By.ID, "attempts"), "the pipeline's attempts")
        assert browser.find_element(By.CSS_SELECTOR, "h1 .state").text == "failing"
        (row,) = browser.find_elements(By.CSS_SELECTOR, "#attempts tbody tr")
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        assert cells[:3] == [attempt_id[:12], "1", "failed"]
        # the innermost error Spark named, with the path in the way, not py4j's "calling oNN.parquet"
        assert blocker in cells[6] and "An error occurred while calling" not in cells[6], cells
        assert cells[7].startswith("SparkJobError: Spark job for batch 1 of pipeline"), cells
        bottom = content_bottom(browser)
    finally:
        browser.switch_to.default_content()
    save_top(browser, SCREENSHOTS / "pipelines_failing.png", frame.rect["y"] + int(bottom) + 24)

    browser.switch_to.frame(frame)
    try:
        browser.execute_script("window.location.search = '?range=year'")
        problem = wait_until(lambda: browser.find_elements(By.ID, "range-problem"), "the range's message")[0]
        assert problem.text == "unknown range 'year': choose one of hour, day, week (shown: the last day)"
        assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, ".ranges a")] == ["hour", "week"]
        charts = browser.find_element(By.CSS_SELECTOR, ".charts")
        bottom = charts.rect["y"] + charts.rect["height"]
    finally:
        browser.switch_to.default_content()
    save_top(browser, SCREENSHOTS / "pipelines_unknown_range.png", frame.rect["y"] + int(bottom) + 24)


def open_plugin(browser, airflow_ui) -> Any:
    """Signed in, the Kafka pipelines page in Airflow's UI; returns its frame."""
    login(browser, airflow_ui)
    browser.get(f"{airflow_ui['url']}/plugin/kafka-pipelines")
    return wait_until(lambda: browser.find_elements(By.TAG_NAME, "iframe"), "the page's frame")[0]


def content_bottom(browser) -> int:
    """Where the frame's content ends (for a screenshot without the blank below it)."""
    return int(
        browser.execute_script(
            "return Math.max(...Array.from(document.body.children, e => e.getBoundingClientRect().bottom))"
        )
    )


def save_top(driver, path: Path, height: int) -> None:
    """A screenshot of the window's top ``height`` pixels: the page without the blank space below it."""
    width = driver.execute_script("return window.innerWidth")
    clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip})
    path.write_bytes(base64.b64decode(shot["data"]))


def test_the_pages_transactions_are_read_only(ledger):
    with pytest.raises(psycopg2.errors.ReadOnlySqlTransaction):
        with ledger.transaction(read_only=True) as tx:
            tx.execute("INSERT INTO {s}.pipelines (name, spec) VALUES ('written', '{{}}')")
    with ledger.transaction(read_only=True) as tx:
        assert tx.pipeline_names(10) == ([], 0)
