"""The proof of a batch's files (``kafka_batch_proof``: their footers against the Kafka read's counts) on files
Spark wrote: a record outside its range, a partition written twice, a file of another attempt and a missing
file each fail the attempt with an error naming it, nothing is committed, and the retry commits every record
once. On the Connect server (the app runs in this process: each mutation alone) and through spark-submit
(``mutating_batch_app.py``, the driver reading the footers with parquet-java: all at once). The other Spark
lines: ``test_spark_lines.py``; the proof's every case on footers as the runtimes read them:
``tests/unit/test_batch_proof.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.spark.settings import SparkSettings, app_file

from .batch_mutations import KINDS, expected_problems, mutate
from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce
from .pipeline import ACTOR, commit, plan, read, sink_of

MUTATING_APP = str(Path(__file__).with_name("mutating_batch_app.py"))


def assert_naming(text: str, topic: str, kinds: tuple[str, ...]) -> None:
    for kind, pattern in expected_problems(topic, kinds).items():
        assert re.search(pattern, text), f"{kind}: {pattern} not in {text}"


def assert_nothing_committed(ledger, name: str) -> None:
    assert committed_rows(ledger, name) == []
    assert {row[1] for row in ledger_ranges(ledger, name)} == {"planned"}


@pytest.mark.parametrize("kind", KINDS)
def test_on_spark_connect_a_write_gone_wrong_fails_the_attempt_naming_it_and_the_retry_commits_once(
    stack, ledger, spark_connect, make_topic, tmp_path, monkeypatch, kind
):
    from airflow_kafka_offsets.spark_apps import kafka_range_batch as app

    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, 300, 3, "m-")
    spec = build_spec(f"proof_{kind}", [topic], str(tmp_path / "out"))
    outcome = plan(ledger, spec, stack)
    write_staged = app.write_staged

    def write_then_mutate(records, job):
        written = write_staged(records, job)
        mutate(job, [kind])
        return written

    monkeypatch.setattr(app, "write_staged", write_then_mutate)
    with pytest.raises(SparkJobError) as failed:
        read(ledger, spec, stack, outcome, spark_connect)
    assert_naming(str(failed.value), topic, (kind,))
    assert_nothing_committed(ledger, spec.name)

    monkeypatch.setattr(app, "write_staged", write_staged)
    read(ledger, spec, stack, outcome, spark_connect)
    commit(ledger, spec, outcome.plan.batch_id)
    assert_exactly_once(committed_rows(ledger, spec.name), produced)
    assert [row[-1] for row in ledger_ranges(ledger, spec.name)] == [100, 100, 100]


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


def test_through_spark_submit_every_write_gone_wrong_is_named_and_the_retry_commits_once(
    stack, ledger, make_topic, tmp_path, monkeypatch
):
    fail_then_retry_through_spark_submit(
        stack, ledger, make_topic, tmp_path, monkeypatch, "proof_submit", stack.connector_jars
    )
