"""Checks of the proof of a batch's files shared by its tests (``test_batch_proof_spark.py``) and the Spark lines'
(``test_spark_lines.py``): an attempt whose files ``batch_mutations.py`` tampered with, then its retry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.spark.settings import SparkSettings, app_file

from .batch_mutations import KINDS, expected_problems
from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce
from .pipeline import ACTOR, commit, plan, sink_of

MUTATING_APP = str(Path(__file__).with_name("mutating_batch_app.py"))


def assert_naming(text: str, topic: str, kinds: tuple[str, ...]) -> None:
    for kind, pattern in expected_problems(topic, kinds).items():
        assert re.search(pattern, text), f"{kind}: {pattern} not in {text}"


def assert_nothing_committed(ledger, name: str) -> None:
    assert committed_rows(ledger, name) == []
    assert {row[1] for row in ledger_ranges(ledger, name)} == {"planned"}


def fail_then_retry_through_spark_submit(
    stack, ledger, make_topic, tmp_path, monkeypatch, name: str, jars, records: int = 300
) -> tuple[str, list[dict]]:
    """A batch of ``records`` in three partitions whose first attempt's files get every mutation (spark-submit
    runs ``mutating_batch_app.py``) and whose retry runs the package's app: checked to fail naming each, then
    to commit every record once. The Spark version that ran it and the records produced."""
    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, records, 3, "s-")
    spec = build_spec(name, [topic], str(tmp_path / "out"))
    outcome = plan(ledger, spec, stack)
    log = tmp_path / "spark-submit.log"

    def attempt(application: str | None):
        runner = settings_runner(SparkSettings(jars=tuple(jars), application=application, log_file=str(log)))
        kafka = {"bootstrap.servers": stack.bootstrap_servers}
        return run_batch(ledger, sink_of(ledger, spec), outcome.plan, runner, kafka, ACTOR)

    monkeypatch.setenv("AKO_TEST_MUTATIONS", ",".join(KINDS))
    monkeypatch.setenv("AKO_TEST_APP_FILE", app_file())
    with pytest.raises(SparkJobError) as failed:
        attempt(MUTATING_APP)
    # the error's root cause is the proof's (its first problems); the driver's log has every one
    assert "root cause: kafka_batch_check.BatchCheckError: files of 2 writes, not one" in str(failed.value)
    assert_naming(log.read_text(), topic, KINDS)
    assert_nothing_committed(ledger, name)
    report = attempt(None)
    commit(ledger, spec, outcome.plan.batch_id)
    assert_exactly_once(committed_rows(ledger, name), produced)
    return str(report.spark_version), produced
