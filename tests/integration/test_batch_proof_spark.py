"""The proof of a batch's files (``kafka_batch_proof``: their footers against the Kafka read's counts) on files
Spark wrote: a record outside its range, a partition written twice, a file of another attempt and a missing
file each fail the attempt with an error naming it, nothing is committed, and the retry commits every record
once. On the Connect server (the app runs in this process: each mutation alone) and through spark-submit
(``mutating_batch_app.py``, the driver reading the footers with parquet-java: all at once). The other Spark
lines: ``test_spark_lines.py``; the proof's every case on footers as the runtimes read them:
``tests/unit/test_batch_proof.py``."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError

from .batch_mutations import KINDS, mutate
from .batch_proof import assert_naming, assert_nothing_committed, fail_then_retry_through_spark_submit
from .helpers import assert_exactly_once, committed_rows, ledger_ranges, payload_per_partition, produce, range_bytes
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


@pytest.mark.parametrize("size_statistics", ["recorded", "not-recorded"])
def test_on_spark_connect_a_batchs_bytes_come_from_its_footers_or_else_from_its_files_exactly(
    stack, ledger, spark_connect, make_topic, tmp_path, monkeypatch, size_statistics
):
    """A raw batch on Spark 4 takes each partition's key + value bytes from its files' size statistics (no sum in
    the write); files whose footers record none (another writer: here, as the worker reads them) have their bytes
    summed from the files."""
    from airflow_kafka_offsets.object_storage import parquet_sizes
    from airflow_kafka_offsets.spark_apps import kafka_batch_check as check

    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, 300, 3, "b-")
    keyless = Producer({"bootstrap.servers": stack.bootstrap_servers})
    for i in range(30):  # records without a key: no key bytes
        keyless.produce(topic, value=b"v" * i, partition=0)
    assert keyless.flush(30) == 0
    expected = payload_per_partition(produced, 3)
    expected[0] += sum(range(30))
    if size_statistics == "not-recorded":
        unencoded_sizes = parquet_sizes.unencoded_sizes
        monkeypatch.setattr(parquet_sizes, "unencoded_sizes", lambda footer: [{} for _ in unencoded_sizes(footer)])
    summed_from_files = []
    counted_from_read = check.counted_from_read

    def summed(frame):
        summed_from_files.append(frame)
        return counted_from_read(frame)

    monkeypatch.setattr(check, "counted_from_read", summed)
    spec = build_spec(f"proof_bytes_{size_statistics.replace('-', '_')}", [topic], str(tmp_path / "out"))
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome, spark_connect)
    commit(ledger, spec, outcome.plan.batch_id)

    assert len(summed_from_files) == (0 if size_statistics == "recorded" else 1)
    assert range_bytes(ledger, spec.name) == [(0, 130, expected[0]), (1, 100, expected[1]), (2, 100, expected[2])]
    rows = committed_rows(ledger, spec.name)
    assert_exactly_once([r for r in rows if r["key"] is not None], produced)
    assert sorted((r["partition"], r["offset"], r["value"]) for r in rows if r["key"] is None) == [
        (0, 100 + i, b"v" * i) for i in range(30)
    ]
