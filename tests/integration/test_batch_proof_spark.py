"""The proof of a batch's files (``kafka_batch_proof``: their footers against the Kafka read's counts) on files
Spark wrote: a record outside its range, a partition written twice, a file of another attempt and a missing
file each fail the attempt with an error naming it, nothing is committed, and the retry commits every record
once. On the Connect server (the app runs in this process: each mutation alone) and through spark-submit
(``mutating_batch_app.py``, the driver reading the footers with parquet-java: all at once). The other Spark
lines: ``test_spark_lines.py``; the proof's every case on footers as the runtimes read them:
``tests/unit/test_batch_proof.py``."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError

from .batch_mutations import KINDS, mutate
from .batch_proof import assert_naming, assert_nothing_committed, fail_then_retry_through_spark_submit
from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce
from .pipeline import commit, plan, read


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


def test_through_spark_submit_every_write_gone_wrong_is_named_and_the_retry_commits_once(
    stack, ledger, make_topic, tmp_path, monkeypatch
):
    fail_then_retry_through_spark_submit(
        stack, ledger, make_topic, tmp_path, monkeypatch, "proof_submit", stack.connector_jars
    )
