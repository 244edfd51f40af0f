"""The manual-operations trigger form in Airflow's own UI, in a real headless browser.

Airflow (api-server, scheduler, dag-processor) runs the project's dags/ on the local stack; the
test logs in, opens the form of ``kafka_offsets_manual_ops``, triggers runs the way a user does and
checks what they did to (and read from) the ledger. Screenshots go to ``out/screenshots/`` (on an older
Airflow line, under scripts/airflow-matrix: ``out/screenshots/airflow-<line>/``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

import devstack
from airflow_kafka_offsets.airflow_features import airflow_line
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.operation_fields import form_fields
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.sinks import REPORT_NAME

from .helpers import committed_rows, local_path, produce
from .pipeline import run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

DAG_ID = "kafka_offsets_manual_ops"
PIPELINE = "demo_events"  # the form's default
_LINE = os.environ.get("AKO_AIRFLOW_MATRIX")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "out" / "screenshots" / (f"airflow-{_LINE}" if _LINE else "")
# What a run triggered from the untouched form carries in its conf (the DAG's params, null ones left out)
FORM_DEFAULTS = {f.name: f.default for f in form_fields() if f.default is not None} | {"require_approval": False}


def api(airflow: dict, path: str) -> Any:
    if "token" not in airflow:
        airflow["token"] = devstack.airflow.token(airflow)
    return devstack.airflow.api(airflow, path, airflow["token"])


def run_ids(airflow: dict) -> set[str]:
    return {r["dag_run_id"] for r in api(airflow, f"dags/{DAG_ID}/dagRuns?limit=100")["dag_runs"]}


def wait_for_new_run(airflow: dict, before: set[str], timeout: float = 240) -> str:
    """The run the click created, once it finished; fails on anything but success."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = run_ids(airflow) - before
        if new:
            (run_id,) = new
            state = api(airflow, f"dags/{DAG_ID}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                assert state == "success", f"run {run_id} {state}: see {airflow['home']}/logs"
                return run_id
        time.sleep(2)
    raise AssertionError(f"no finished run of {DAG_ID} within {timeout:.0f}s")


def conf_of(airflow: dict, run_id: str) -> dict[str, Any]:
    """The run's conf as the form sent it, without the fields it left empty (null)."""
    conf = api(airflow, f"dags/{DAG_ID}/dagRuns/{run_id}")["conf"]
    return {key: value for key, value in conf.items() if value is not None}


def result_of(airflow: dict, run_id: str) -> Any:
    entry = api(
        airflow, f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/operation/xcomEntries/return_value?deserialize=true"
    )
    return entry["value"]


def nav_item(tag: str, label: str) -> str:
    """The CSS selector of an item of Airflow's side navigation: named by aria-label (3.2 on) or title (3.1)."""
    return f'{tag}[aria-label="{label}"], {tag}[title="{label}"]'


SIGNED_IN = nav_item("button", "Admin")  # Airflow's navigation, shown only to a signed-in user


def login(driver: WebDriver, airflow: dict) -> None:
    """Sign in unless the browser already is. The UI redirects to its login page client-side, after
    the first page has loaded: wait for the login form or the navigation, whichever comes."""
    driver.get(f"{airflow['url']}/")
    (shown,) = wait_until(
        lambda: driver.find_elements(By.CSS_SELECTOR, f"input[name=username], {SIGNED_IN}")[:1],
        "the login form or Airflow's navigation",
        90,
    )
    if shown.get_attribute("name") == "username":
        shown.send_keys(airflow["user"])
        driver.find_element(By.NAME, "password").send_keys(devstack.airflow.password(airflow))
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, SIGNED_IN), "the login to finish", 90)


def page_text(driver: WebDriver) -> str:
    return " ".join(driver.find_element(By.TAG_NAME, "body").text.split())[:300]


def wait_until(condition, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def open_form(driver: WebDriver, airflow: dict) -> WebElement:
    driver.get(f"{airflow['url']}/dags/{DAG_ID}")
    # The page renders client-side; on a busy 2-core machine its first render can take half a minute.
    try:
        buttons = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, 'button[aria-label="Trigger Dag"]'), "", 90)
    except AssertionError:
        raise AssertionError(f"no Trigger button on the page of {DAG_ID}; it shows: {page_text(driver)!r}") from None
    buttons[0].click()
    return wait_until(
        lambda: next(
            (
                d
                for d in driver.find_elements(By.CSS_SELECTOR, "[role=dialog]")
                if d.is_displayed() and "Trigger Dag" in d.text
            ),
            None,
        ),
        "the trigger form",
    )


def trigger_button(form: WebElement) -> WebElement:
    (button,) = [b for b in form.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Trigger"]
    return button


def open_section(form: WebElement, title: str) -> None:
    form.find_element(By.CSS_SELECTOR, f'button[id$=":trigger:{title}"]').click()


def pick(driver: WebDriver, combobox: WebElement, value: str) -> None:
    """Chakra's / react-select's combobox: type ``value``, then click the option it shows."""
    combobox.click()
    combobox.send_keys(value)
    option = wait_until(
        lambda: next(
            (
                o
                for o in driver.find_elements(By.CSS_SELECTOR, "[role=option]")
                if o.is_displayed() and o.text.strip() == value
            ),
            None,
        ),
        f"option {value}",
    )
    option.click()


# Where Airflow's lines draw the trigger form differently, and only here. Airflow 3.1 draws a field with an
# enum as Chakra's select (a button; its options have ids) and marks an empty number field invalid, although
# the field is optional and the run gets null; 3.2 on draw react-select's combobox over a hidden input and
# leave an empty number field unmarked.
CHAKRA_FORM = airflow_line() == "3.1"


def choose(driver: WebDriver, form: WebElement, field: str, value: str) -> None:
    """Pick ``value`` in the select of ``field``."""
    if CHAKRA_FORM:
        select = form.find_element(By.ID, f"select:element_{field}:trigger")
        select.click()
        option = f"select:element_{field}:option:{value}"
        wait_until(lambda: [o for o in driver.find_elements(By.ID, option) if o.is_displayed()], option)[0].click()
        wait_until(lambda: select.text.strip() == value, f"{field} = {value}")
        return
    hidden = form.find_element(By.NAME, f"element_{field}")
    box = hidden.find_element(By.XPATH, "./ancestor::*[.//input[@role='combobox']][1]//input[@role='combobox']")
    pick(driver, box, value)
    wait_until(lambda: hidden.get_attribute("value") == value, f"{field} = {value}")


def invalid_markers(form: WebElement) -> list[str]:
    """The form's fields marked invalid (on 3.1 but the empty number fields, which it marks so anyway)."""
    marked = form.find_elements(By.CSS_SELECTOR, "[aria-invalid=true], [data-invalid]")
    if CHAKRA_FORM:
        empty = {
            e.get_attribute("id")
            for e in form.find_elements(By.CSS_SELECTOR, "[data-scope=number-input][data-part=root]")
            if e.find_element(By.TAG_NAME, "input").get_attribute("value") == ""
        }
        marked = [
            e
            for e in marked
            if e.find_element(By.XPATH, "./ancestor-or-self::*[@data-part='root'][1]").get_attribute("id") not in empty
        ]
    return [e.get_attribute("outerHTML")[:120] for e in marked]


def number_field(form: WebElement, field: str) -> WebElement:
    return form.find_element(By.ID, f"number-input:element_{field}").find_element(By.TAG_NAME, "input")


def clear(element: WebElement) -> None:
    element.send_keys(Keys.CONTROL, "a")
    element.send_keys(Keys.BACKSPACE)


def show_task_log(driver: WebDriver, airflow: dict, run_id: str, text: str) -> None:
    """The task's log page, where the operation prints its result."""
    driver.get(f"{airflow['url']}/dags/{DAG_ID}/runs/{run_id}/tasks/operation")
    wait_until(lambda: text in driver.find_element(By.TAG_NAME, "body").text, f"{text!r} in the task log", 60)


@pytest.fixture()
def demo_pipeline(stack, airflow_ui, make_topic, tmp_path_factory) -> tuple[Ledger, str]:
    """``demo_events`` in the deployment's ledger schema: one committed batch of 10 records over two
    partitions, then 6 more records (lag 3 per partition)."""
    schema = airflow_ui["ledger_schema"]  # the tests' own schema (checked by the fixture): start it afresh
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema)
    ledger.migrate()
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 10, partitions=2)
    run_once(ledger, build_spec(PIPELINE, [topic], str(tmp_path_factory.mktemp("ui-out"))), stack)
    produce(stack.bootstrap_servers, topic, 6, partitions=2)
    assert ledger.cursors(PIPELINE) == {TP(topic, 0): 5, TP(topic, 1): 5}
    return ledger, topic


# part of the smoke of every Airflow line (scripts/airflow-matrix), its outcome in docs/airflow.md's table
@pytest.mark.airflow_line
def test_trigger_form_runs_status_and_a_dry_run_reset(airflow_ui, browser, demo_pipeline):
    ledger, topic = demo_pipeline
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(browser, airflow_ui)

    # status: one click on the form as it opens
    form = open_form(browser, airflow_ui)
    browser.save_screenshot(str(SCREENSHOTS / "manual_ops_form_defaults.png"))
    assert trigger_button(form).is_enabled()
    assert invalid_markers(form) == []
    before = run_ids(airflow_ui)
    trigger_button(form).click()
    run_id = wait_for_new_run(airflow_ui, before)
    assert conf_of(airflow_ui, run_id) == FORM_DEFAULTS
    status = result_of(airflow_ui, run_id)
    assert [
        (p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"], p["lag_records"])
        for p in status["partitions"]
    ] == [(topic, 0, 5, 8, 3), (topic, 1, 5, 8, 3)]
    show_task_log(browser, airflow_ui, run_id, f"pipeline {PIPELINE} ({topic}), lag 6 records")
    browser.save_screenshot(str(SCREENSHOTS / "manual_ops_status_run.png"))

    # reset dry run over every partition: topic and partitions left empty (partitions typed, then cleared)
    batches = [b.plan.batch_id for b in ledger.committed_batches(PIPELINE)]
    form = open_form(browser, airflow_ui)
    choose(browser, form, "operation", "reset")
    open_section(form, "Reset")
    partitions = form.find_element(By.ID, "element_reset_partitions")
    partitions.send_keys("0")
    clear(partitions)
    assert trigger_button(form).is_enabled()
    assert invalid_markers(form) == []
    before = run_ids(airflow_ui)
    trigger_button(form).click()
    run_id = wait_for_new_run(airflow_ui, before)
    assert conf_of(airflow_ui, run_id) == FORM_DEFAULTS | {"operation": "reset"}
    result = result_of(airflow_ui, run_id)
    assert result["applied"] is False and result["dry_run"] is True and result["batch_id"] is None
    assert [(c["topic"], c["partition"], c["before"], c["after"], c["change"]) for c in result["changes"]] == [
        (topic, 0, 5, 8, "skip 3"),
        (topic, 1, 5, 8, "skip 3"),
    ]
    assert ledger.cursors(PIPELINE) == {TP(topic, 0): 5, TP(topic, 1): 5}
    assert [b.plan.batch_id for b in ledger.committed_batches(PIPELINE)] == batches
    show_task_log(browser, airflow_ui, run_id, "reset demo_events to-latest: dry run, nothing changed")
    browser.save_screenshot(str(SCREENSHOTS / "manual_ops_reset_dry_run.png"))


def test_trigger_form_runs_a_replay(airflow_ui, browser, demo_pipeline):
    """The replay of the committed batch 1: its records read again by a Spark job, its output rebuilt in place
    (the pinned line only: the matrix's older lines leave out its two minutes of Spark)."""
    ledger, topic = demo_pipeline
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(browser, airflow_ui)
    (batch,) = ledger.committed_batches(PIPELINE)
    rows = sorted((r["partition"], r["offset"], r["key"]) for r in committed_rows(ledger, PIPELINE))
    form = open_form(browser, airflow_ui)
    choose(browser, form, "operation", "replay")
    open_section(form, "Replay")
    number_field(form, "replay_first_batch").send_keys("1")
    number_field(form, "replay_last_batch").send_keys("1")
    assert trigger_button(form).is_enabled()
    assert invalid_markers(form) == []
    form.screenshot(str(SCREENSHOTS / "manual_ops_form_replay.png"))
    before = run_ids(airflow_ui)
    trigger_button(form).click()
    run_id = wait_for_new_run(airflow_ui, before)
    assert conf_of(airflow_ui, run_id) == FORM_DEFAULTS | {
        "operation": "replay",
        "replay_first_batch": 1,
        "replay_last_batch": 1,
    }
    assert result_of(airflow_ui, run_id) == {"replayed": [1], "outputs": [batch.plan.output_uri]}
    with ledger.transaction() as tx:
        original, replay = tx.attempts(PIPELINE, [1])
    assert (original.state, replay.state) == ("succeeded", "succeeded")
    assert (replay.actor.dag_id, replay.actor.run_id) == (DAG_ID, run_id)
    # the new attempt read exactly the batch's ranges: [0, 5) of each partition
    assert [(p.topic_partition, p.records, p.min_offset, p.max_offset) for p in replay.report.partitions] == [
        (TP(topic, 0), 5, 0, 4),
        (TP(topic, 1), 5, 0, 4),
    ]
    report = json.loads((local_path(batch.plan.output_uri) / REPORT_NAME).read_text())
    assert report["attempt_id"] == replay.attempt_id  # the output now is the replay's
    assert sorted((r["partition"], r["offset"], r["key"]) for r in committed_rows(ledger, PIPELINE)) == rows
    assert ledger.committed_batches(PIPELINE) == [batch]
    assert ledger.cursors(PIPELINE) == {TP(topic, 0): 5, TP(topic, 1): 5}
    show_task_log(browser, airflow_ui, run_id, f"replayed batch 1 -> {batch.plan.output_uri}")
    browser.save_screenshot(str(SCREENSHOTS / "manual_ops_replay_run.png"))


@pytest.mark.airflow_line
def test_trigger_form_refuses_bad_input_in_the_page(airflow_ui, browser):
    login(browser, airflow_ui)
    form = open_form(browser, airflow_ui)
    choose(browser, form, "operation", "reset")
    open_section(form, "Reset")
    form.find_element(By.ID, "element_reset_partitions").send_keys("1;2")
    before = run_ids(airflow_ui)
    trigger_button(form).click()
    message = wait_until(lambda: "reset_partitions" in form.text and form.text, "the refusal")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "manual_ops_bad_input.png"))
    assert "Invalid input for param reset_partitions: '1;2'" in message
    # the rule in words stands under the field
    assert "Comma-separated partition numbers, e.g. 0,2 (empty: every partition)." in message
    time.sleep(3)
    assert run_ids(airflow_ui) == before
