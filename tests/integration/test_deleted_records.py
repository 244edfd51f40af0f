"""Batches whose records Kafka deleted, on the real stack: refused from the log start offsets before
any Spark job, with one message for the case, and nothing changed.

Records are deleted with Kafka's delete-records (what retention does to a log's start, at once). A
replay of committed batches is refused for all of them before any starts; the read of a planned
batch is refused before an attempt is recorded; the CLI shows a progress line and names the file
holding Spark's log instead of printing it.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as KafkaTP

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import RecordsDeletedError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.read import run_batch

from . import pipeline
from .helpers import ledger_ranges, local_path, produce
from .pipeline import ACTOR, plan, run_once, sink_of, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")
CLI = str(Path(sys.executable).parent / "airflow-kafka-offsets")


def delete_records(kafka_admin, topic: str, before: int) -> None:
    """Kafka's delete-records on partition 0: the log start moves to ``before``, as retention would move it."""
    done = kafka_admin.delete_records([KafkaTP(topic, 0, before)])
    next(iter(done.values())).result(timeout=30)


def ledger_state(ledger: Ledger, pipeline_name: str) -> tuple:
    """Everything a refused operation must leave as it was: ranges, cursors, attempts, audit trail."""
    with ledger.transaction() as tx:
        attempts = tx.fetchall("SELECT attempt_id, state FROM {s}.attempts WHERE pipeline = %s", (pipeline_name,))
        audit = tx.fetchall("SELECT event FROM {s}.audit WHERE pipeline = %s ORDER BY 1", (pipeline_name,))
    return ledger_ranges(ledger, pipeline_name), ledger.cursors(pipeline_name), sorted(attempts), audit


def spark_logs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "airflow-kafka-offsets-replay-*.log")))


def test_replay_of_deleted_records_is_refused_before_spark_and_the_cli_keeps_sparks_log_in_a_file(
    stack, ledger, schema, make_topic, kafka_admin, tmp_path
):
    topic = make_topic(partitions=1)
    spec = build_spec("gone", [topic], str(tmp_path / "out"))
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    first = run_once(ledger, spec, stack)
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    run_once(ledger, spec, stack)
    delete_records(kafka_admin, topic, 5)
    before, output = ledger_state(ledger, "gone"), local_path(first.plan.output_uri)
    files = {p: p.stat().st_mtime_ns for p in output.rglob("*")}
    logs = spark_logs()

    common = ("gone", "--ledger-schema", schema, "--spark-conn-id", "spark_default")
    refused = subprocess.run([CLI, "replay", *common, "--batches", "1-2"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines()[-1] == (
        f"airflow-kafka-offsets replay: batch 1 of pipeline 'gone' cannot be rebuilt: Kafka no longer holds records "
        f"it committed ({topic}-0 offsets [0, 5) (log start is now 5); retention or delete-records removed them). "
        "Nothing was started and nothing changed: the committed output stays as it is, and it is now the only copy "
        "of those records, so keep it. Batches 2 of the selection are still in Kafka: replay them alone (--batches, "
        "or first/last batch in the form)."
    )
    assert "Traceback" not in refused.stderr and len(refused.stderr.splitlines()) < 5
    assert ledger_state(ledger, "gone") == before  # no attempt, no audit event, same ranges and cursor
    assert {p: p.stat().st_mtime_ns for p in output.rglob("*")} == files
    assert not spark_logs() - logs  # no Spark job ran: no new log file left behind

    # A batch still in Kafka replays with spark-submit: progress lines, and Spark's log in a file it names.
    done = subprocess.run([CLI, "replay", *common, "--batches", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("replayed batch 2 -> ")
    lines = done.stderr.splitlines()
    assert any("pipeline gone: replaying batch 2 (10 records) with Spark" in line for line in lines)
    (log_file,) = spark_logs() - logs
    assert lines[-1] == f"airflow-kafka-offsets replay: Spark's log is in {log_file} (--verbose prints it here)"
    assert len(lines) < 15 and "Spark-Submit cmd" not in done.stderr
    assert "Spark-Submit cmd: spark-submit" in Path(log_file).read_text()
    os.unlink(log_file)


def test_a_planned_batch_whose_records_were_deleted_is_refused_before_an_attempt(
    stack, ledger, make_topic, kafka_admin, tmp_path
):
    topic = make_topic(partitions=1)
    spec = build_spec("gone_planned", [topic], str(tmp_path / "out"))
    produce(stack.bootstrap_servers, topic, 12, partitions=1)
    planned = plan(ledger, spec, stack).plan
    delete_records(kafka_admin, topic, 7)
    before = ledger_state(ledger, "gone_planned")
    kafka = KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})
    with pytest.raises(RecordsDeletedError) as refused:
        run_batch(
            ledger,
            sink_of(ledger, spec),
            planned,
            submitter(stack, pipeline.SPARK_CONN_ID),
            {},
            ACTOR,
            offsets_source=kafka.offsets,
        )
    assert str(refused.value) == (
        f"batch 1 of pipeline 'gone_planned' is planned but Kafka no longer holds records of it ({topic}-0 offsets "
        "[0, 7) (log start is now 7); retention or delete-records removed them before it was read). No Spark job "
        "was started. Abort the batch ('abort' operation) and let the next run plan again: planning then fails on "
        "the deleted span unless the pipeline's on_data_loss is 'skip', which records the span as skipped"
    )
    assert ledger_state(ledger, "gone_planned") == before
