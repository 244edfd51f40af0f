"""Approvals of a reset in Airflow's own human-in-the-loop UI, in a real headless browser.

Airflow's scheduler runs ``kafka_offsets_manual_ops`` with *Require approval* on: the preview task
runs the reset's dry run, the approval task waits in *Required actions* showing its table, and the
test clicks Approve or Reject the way a person does. Approved, the reset applies exactly the table
shown and its audit row names the person who approved and the digest approved; rejected, or changed
since the dry run, the ledger stays as it was, and a changed one shows as a failed approval where the
approver looks. No Spark is involved.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

import devstack
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.reset import reset_offsets

from .helpers import ledger_ranges, produce
from .pipeline import operation_context
from .test_manual_ops_ui import DAG_ID, SCREENSHOTS, api, login, wait_until
from .test_pipelines_page import save_top

TIMEOUT_S = 240


@pytest.fixture()
def reset_pipeline(stack, airflow_ui, make_topic) -> tuple[Ledger, str, str]:
    """(ledger, pipeline, topic): cursors at offset 2 of 2 partitions with 5 records each (lag 3 each)."""
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=airflow_ui["ledger_schema"])
    ledger.migrate()
    topic = make_topic(partitions=2)
    pipeline = f"approve_{uuid.uuid4().hex[:8]}"
    produce(stack.bootstrap_servers, topic, 10, partitions=2)
    with ledger.transaction() as tx:
        tx.lock_pipeline(build_spec(pipeline, [topic], "/tmp/ako-approvals-output"))
    reset_offsets(operation_context(ledger, stack), pipeline, ResetRequest(ResetMode.TO_OFFSET, offset=2), False)
    assert ledger.cursors(pipeline) == {TP(topic, 0): 2, TP(topic, 1): 2}
    return ledger, pipeline, topic


def trigger_reset(airflow: dict, pipeline: str) -> str:
    """A run of the manual-operations DAG: reset to-latest, dry run off, approval required."""
    conf = {
        "operation": "reset",
        "pipeline": pipeline,
        "reset_mode": "to-latest",
        "dry_run": False,
        "require_approval": True,
    }
    return api_call(airflow, f"dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": conf})["dag_run_id"]


def api_call(airflow: dict, path: str, body: dict) -> Any:
    api(airflow, "version")  # signs in once (the token is kept in ``airflow``)
    return devstack.airflow.api(airflow, path, airflow["token"], method="POST", body=body)


def task_states(airflow: dict, run_id: str) -> dict[str, str | None]:
    tis = api(airflow, f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return {t["task_id"]: t["state"] for t in tis}


def wait_for_states(airflow: dict, run_id: str, wanted: dict[str, str]) -> dict[str, str | None]:
    deadline = time.monotonic() + TIMEOUT_S
    states: dict[str, str | None] = {}
    while time.monotonic() < deadline:
        states = task_states(airflow, run_id)
        if all(states.get(task) == state for task, state in wanted.items()):
            return states
        if any(s in ("failed", "upstream_failed") for t, s in states.items() if wanted.get(t) != s):
            break
        time.sleep(2)
    raise AssertionError(f"run {run_id}: tasks {states}, waited for {wanted}; see {airflow['home']}/logs")


def wait_parked(airflow: dict, run_id: str) -> None:
    """Until the scheduler has handled the end of the approval task's first workload (the one that parked
    it in awaiting_input). Airflow 3.3.2 fails a task whose answer arrives before that (the executor's
    "success" then meets a queued task: "state changed externally"); a person answers later than a test."""
    log = Path(airflow["home"]) / "logs" / "scheduler.out"
    parked = f"task_id=approval, run_id={run_id}, map_index=-1"
    wait_until(
        lambda: any(parked in line and "state=awaiting_input" in line for line in log.read_text().splitlines()),
        "the scheduler to see the approval task parked",
        60,
    )


def open_required_action(driver: WebDriver, airflow: dict, run_id: str) -> str:
    """The approval task's *Required action* tab; returns its text once the question shows."""
    driver.get(f"{airflow['url']}/dags/{DAG_ID}/runs/{run_id}/tasks/approval/required_actions")
    return wait_until(
        lambda: (text := driver.find_element(By.TAG_NAME, "body").text) and "Dry run digest" in text and text,
        "the approval's question",
        90,
    )


def click(driver: WebDriver, label: str) -> None:
    (button,) = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == label]
    button.click()


def ledger_state(ledger: Ledger, pipeline: str) -> tuple:
    with ledger.transaction() as tx:
        batches = [(b.batch_id, b.kind, b.state) for b in tx.recent_batches(pipeline, 10)]
    return ledger.cursors(pipeline), batches, ledger_ranges(ledger, pipeline)


def dry_run_cells(driver: WebDriver) -> list[list[str]]:
    return [
        [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        for row in driver.find_elements(By.CSS_SELECTOR, "table tbody tr")
    ]


def test_an_approved_reset_applies_exactly_the_dry_run_shown(airflow_ui, browser, reset_pipeline):
    ledger, pipeline, topic = reset_pipeline
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(browser, airflow_ui)
    run_id = trigger_reset(airflow_ui, pipeline)
    wait_for_states(airflow_ui, run_id, {"preview": "success", "approval": "awaiting_input"})
    wait_parked(airflow_ui, run_id)
    assert ledger.cursors(pipeline) == {TP(topic, 0): 2, TP(topic, 1): 2}  # waiting: nothing changed yet

    text = open_required_action(browser, airflow_ui, run_id)
    assert f"Approve reset of pipeline {pipeline}?" in text
    assert dry_run_cells(browser) == [[f"{topic}-0", "2", "5", "skip 3"], [f"{topic}-1", "2", "5", "skip 3"]]
    save_top(browser, SCREENSHOTS / "approval_reset.png", 640)
    click(browser, "Approve")
    wait_for_states(airflow_ui, run_id, {"approval": "success", "operation": "success"})

    result = api(
        airflow_ui, f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/operation/xcomEntries/return_value?deserialize=true"
    )["value"]
    assert (result["applied"], result["batch_id"]) == (True, 2)
    cursors, batches, ranges = ledger_state(ledger, pipeline)
    assert cursors == {TP(topic, 0): 5, TP(topic, 1): 5}
    assert batches == [(2, "reset", "committed"), (1, "reset", "committed")]
    # the span it skipped, [2, 5) of each partition, recorded as an empty range at the new cursor
    assert [r[:7] for r in ranges if r[0] == 2] == [
        (2, "committed", topic, 0, 2, 5, 5),
        (2, "committed", topic, 1, 2, 5, 5),
    ]
    shown = xcom(airflow_ui, run_id, "preview")
    answer = xcom(airflow_ui, run_id, "approval")
    assert answer["chosen_options"] == ["Approve"] and answer["approved_digest"] == shown["digest"]
    assert answer["responded_by_user"]["name"] == airflow_ui["user"]
    with ledger.transaction() as tx:
        (audit,) = tx.fetchall(
            "SELECT actor->>'run_id', actor->>'task_id', actor->>'approved_by', actor->>'approved_by_id',"
            " actor->>'approved_digest' FROM {s}.audit WHERE pipeline = %s AND batch_id = 2 AND event = 'reset'",
            (pipeline,),
        )
    # the person who clicked Approve, and the digest of the dry run they saw (its first 16 under the table)
    assert audit == (run_id, "operation", airflow_ui["user"], answer["responded_by_user"]["id"], shown["digest"])
    assert f"Dry run digest: {shown['digest'][:16]}" in text


def xcom(airflow: dict, run_id: str, task_id: str) -> Any:
    path = f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value?deserialize=true"
    return api(airflow, path)["value"]


def test_a_rejected_reset_changes_nothing(airflow_ui, browser, reset_pipeline):
    ledger, pipeline, _ = reset_pipeline
    before = ledger_state(ledger, pipeline)
    login(browser, airflow_ui)
    run_id = trigger_reset(airflow_ui, pipeline)
    wait_for_states(airflow_ui, run_id, {"approval": "awaiting_input"})
    wait_parked(airflow_ui, run_id)
    open_required_action(browser, airflow_ui, run_id)
    click(browser, "Reject")
    wait_for_states(airflow_ui, run_id, {"approval": "success", "operation": "skipped"})
    assert ledger_state(ledger, pipeline) == before


def test_a_reset_that_changed_since_its_approval_is_refused(airflow_ui, browser, reset_pipeline, stack):
    ledger, pipeline, topic = reset_pipeline
    before = ledger_state(ledger, pipeline)
    login(browser, airflow_ui)
    run_id = trigger_reset(airflow_ui, pipeline)
    wait_for_states(airflow_ui, run_id, {"approval": "awaiting_input"})
    wait_parked(airflow_ui, run_id)
    open_required_action(browser, airflow_ui, run_id)
    produce(stack.bootstrap_servers, topic, 2, partitions=2)  # to-latest would now skip 4, not the 3 shown
    click(browser, "Approve")
    # refused by the approval task itself: the task the approver answered fails, the operation never runs
    wait_for_states(airflow_ui, run_id, {"approval": "failed", "operation": "upstream_failed"})
    assert ledger_state(ledger, pipeline) == before
    log = Path(airflow_ui["home"], "logs", f"dag_id={DAG_ID}", f"run_id={run_id}", "task_id=approval", "attempt=1.log")
    text = log.read_text()
    assert f"reset of pipeline '{pipeline}' (approved by {airflow_ui['user']}) refused, nothing changed" in text
    assert f"{topic}-0       2      6  skip 4" in text  # what it would do now, not what was approved

    # where the approver looks: the approval task's page says Failed, not only the answer given
    browser.get(f"{airflow_ui['url']}/dags/{DAG_ID}/runs/{run_id}/tasks/approval")
    header = wait_until(
        lambda: (t := browser.find_element(By.TAG_NAME, "body").text) and "failed" in t.lower() and t,
        "the approval task's state",
        60,
    )
    assert "approval" in header
    save_top(browser, SCREENSHOTS / "approval_refused.png", 640)
