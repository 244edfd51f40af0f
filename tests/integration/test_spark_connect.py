"""Spark Connect execution on the real stack: a ``spark_connect`` connection runs the read step on the
stack's long-lived Connect server (``spark_connect`` fixture) instead of spark-submit.

Exactly-once over successive batches (exact ids, offsets and ledger rows), a worker killed inside the
commit transaction, and the Connect server killed mid-batch: the attempt fails clearly, the retry
after the restart reads the batch, and every record is in the output once.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import devstack
from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.clients.kafka_config import java_client_properties
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError
from airflow_kafka_offsets.hooks.spark import spark_connection
from airflow_kafka_offsets.object_storage.storage import Storage
from airflow_kafka_offsets.runtime import object_storage, settings_runner
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink
from airflow_kafka_offsets.spark.connect import remote_session
from airflow_kafka_offsets.spark.settings import SparkSettings
from faults_harness.context import Context
from faults_harness.driver import run_dag
from faults_harness.kinds import crash
from faults_harness.pipeline import Pipeline
from faults_harness.verify import verify

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, payload_per_partition, produce, range_bytes
from .pipeline import ACTOR, commit, plan, read, run_once


def server_application(conn_id: str) -> str:
    session = remote_session(spark_connection(conn_id).connect_url())
    try:
        return str(session.conf.get("spark.app.id"))
    finally:
        session.stop()


def attempt_rows(ledger, pipeline: str) -> list[tuple[int, str, str | None, str | None]]:
    """(batch, state, the report's Spark application, the error's first 60 characters) per attempt."""
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT batch_id, state, report->>'application_id', left(error, 60) FROM {s}.attempts"
            " WHERE pipeline = %s ORDER BY started_at",
            (pipeline,),
        )
    return [(int(b), s, app, err) for b, s, app, err in rows]


def test_batches_read_on_the_connect_server_commit_every_record_once(
    stack, spark_connect, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=3)
    spec = build_spec("cx", [topic], str(tmp_path))
    first = produce(stack.bootstrap_servers, topic, 300, 3, "a-")
    assert run_once(ledger, spec, stack, spark_connect).records == 300
    second = produce(stack.bootstrap_servers, topic, 90, 3, "b-")
    assert run_once(ledger, spec, stack, spark_connect).records == 90

    assert_exactly_once(committed_rows(ledger, "cx"), first + second)
    assert [r[:4] + r[5:] for r in ledger_ranges(ledger, "cx")] == [
        (1, "committed", topic, 0, 0, 100, 100),
        (1, "committed", topic, 1, 0, 100, 100),
        (1, "committed", topic, 2, 0, 100, 100),
        (2, "committed", topic, 0, 100, 130, 30),
        (2, "committed", topic, 1, 100, 130, 30),
        (2, "committed", topic, 2, 100, 130, 30),
    ]
    # both attempts ran in the server's one long-lived application: no spark-submit started
    app = server_application(spark_connect)
    assert attempt_rows(ledger, "cx") == [(1, "succeeded", app, None), (2, "succeeded", app, None)]


def test_a_worker_killed_inside_the_commit_transaction_loses_and_duplicates_nothing(
    stack, spark_connect, schema, tmp_path
):
    """Each step in its own process, as Airflow tasks; the read step's ``spark_default`` is the Connect server."""
    env = {"AIRFLOW_CONN_SPARK_DEFAULT": os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"]}
    # a session may change SQL settings only; the server's start decides the rest (its UI too)
    ctx = Context(stack, schema=schema, workdir=tmp_path, spark_conf={"spark.sql.shuffle.partitions": "3"}, env=env)
    ctx.ledger().migrate()
    pipe = Pipeline(ctx, "cxcrash", 0, random.Random(0))
    pipe.produce(150, "a-")
    fault = crash("commit", "in_commit_transaction")(pipe)
    outcome = run_dag(pipe, "run1", faults=[fault])

    assert outcome.ok and outcome.committed_now, pipe.failure_tails()
    assert [(s.step, s.try_number, s.ok) for s in pipe.steps] == [
        ("plan", 1, True),
        ("read", 1, True),
        ("commit", 1, False),
        ("commit", 2, True),
    ]
    assert pipe.workers[2].returncode == -9  # SIGKILL inside the transaction
    verdict = verify(ctx.ledger(), pipe.name, pipe.output_root, pipe.produced)
    assert verdict.ok and (verdict.read, verdict.batches) == (150, 1), verdict.summary() + str(verdict.problems)
    app = server_application(spark_connect)
    assert attempt_rows(ctx.ledger(), pipe.name) == [(1, "succeeded", app, None)]


# Serial: it kills the Connect server the other tests share.
@pytest.mark.serial
def test_the_connect_server_killed_mid_batch_fails_the_attempt_and_the_retry_reads_it_once(
    stack, spark_connect, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=2)
    spec = build_spec("cxkill", [topic], str(tmp_path))
    produced = produce(stack.bootstrap_servers, topic, 1000, 2, "k-")
    outcome = plan(ledger, spec, stack)
    killed: list[str] = []

    def kill_when_the_attempt_runs() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not attempt_rows(ledger, "cxkill"):
            time.sleep(0.01)
        killed.append(attempt_rows(ledger, "cxkill")[0][1])
        devstack.restart_spark_connect(hard=True)  # SIGKILL, then the same port and token again

    killer = threading.Thread(target=kill_when_the_attempt_runs)
    killer.start()
    with pytest.raises(SparkJobError, match=r"Spark Connect server at localhost:\d+") as failed:
        read(ledger, spec, stack, outcome, spark_connect)
    killer.join()
    assert killed == ["running"]  # the attempt was running when the server was killed
    print(f"the attempt failed with: {failed.value}")
    host = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    assert host["password"] not in str(failed.value)  # the token stays out of the error
    assert [(b, s) for b, s, _, _ in attempt_rows(ledger, "cxkill")] == [(1, "failed")]

    read(ledger, spec, stack, outcome, spark_connect)  # the task's retry, on the restarted server
    assert commit(ledger, spec, outcome.plan.batch_id).records == 1000
    assert_exactly_once(committed_rows(ledger, "cxkill"), produced)
    assert [r[:4] + r[5:] for r in ledger_ranges(ledger, "cxkill")] == [
        (1, "committed", topic, 0, 0, 500, 500),
        (1, "committed", topic, 1, 0, 500, 500),
    ]
    app = server_application(spark_connect)
    assert [(b, s, a) for b, s, a, _ in attempt_rows(ledger, "cxkill")] == [(1, "failed", None), (1, "succeeded", app)]


def test_sasl_credentials_and_the_token_stay_out_of_logs_and_the_servers_files(
    stack, spark_connect, ledger, make_topic, tmp_path, capfd, caplog
):
    """Kafka's SASL password travels as a reader option over the Connect channel, the token inside the
    connection URL: neither reaches the worker's output, its log, the ledger or the server's log and files."""
    caplog.set_level("DEBUG")
    topic = make_topic(partitions=2)
    produced = produce(stack.bootstrap_servers, topic, 60, 2, "s-")
    spec = build_spec("cxsasl", [topic], str(tmp_path / "out"))
    sink = LocalDirectorySink(spec.output_root)
    planned = plan_batch(ledger, spec, KafkaOffsetsClient(stack.sasl_client_config()).offsets, sink, ACTOR).plan
    runner = settings_runner(SparkSettings(conn_id=spark_connect))
    run_batch(ledger, sink, planned, runner, java_client_properties(stack.sasl_client_config()), ACTOR)
    assert commit_batch(ledger, sink, "cxsasl", planned.batch_id, ACTOR).records == 60
    assert_exactly_once(committed_rows(ledger, "cxsasl"), produced)

    token = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])["password"]
    captured = capfd.readouterr()
    server = devstack.status()["services"]["spark_connect"]
    server_files = [p for p in Path(server["log"]).parent.rglob("*") if p.is_file() and p.name != "token"]
    with ledger.transaction() as tx:
        ledger_text = json.dumps(tx.fetchall("SELECT * FROM {s}.attempts"), default=str)
    for secret in (stack.sasl_password, token):
        assert secret not in captured.out + captured.err + caplog.text
        assert secret not in ledger_text
        assert [str(p) for p in server_files if secret.encode() in p.read_bytes()] == []
    assert "staged by Spark Connect" in caplog.text


def test_a_batch_for_an_s3_table_is_written_by_the_server_with_the_keys_as_session_conf(
    stack, spark_connect, ledger, make_topic
):
    """The S3 keys reach the server's S3A as session conf; the worker writes the report to S3 itself."""
    topic = make_topic(partitions=2)
    root = f"s3://{stack.s3_bucket}/{uuid.uuid4().hex}/lake"
    spec = build_spec("cxs3", [topic], root, sink={"format": "iceberg", "table": "lake.cxs3"})
    produced = produce(stack.bootstrap_servers, topic, 80, 2, "s3-")
    assert run_once(ledger, spec, stack, spark_connect).records == 80

    storage = Storage(object_storage(root))
    catalog = SqlCatalog(ledger.schema, uri=stack.pg_url(), **storage.pyiceberg_properties())
    rows = catalog.load_table("lake.cxs3").scan().to_arrow().select(["key", "partition", "offset"]).to_pylist()
    assert_exactly_once(rows, produced)
    app = server_application(spark_connect)
    assert attempt_rows(ledger, "cxs3") == [(1, "succeeded", app, None)]


def test_the_apps_summary_counts_records_offsets_and_duplicates_exactly_across_offset_blocks(spark_connect):
    """The read-back check's per-partition summary (a batch of more ranges than its write counts) on real Spark,
    against the same figures computed here: offsets on both sides of the edges of its 64-offset blocks, a
    repeated offset, a null key and value."""
    from airflow_kafka_offsets.spark.connect import connect_mode
    from airflow_kafka_offsets.spark_apps import kafka_batch_check as check

    rows = [("a", 0, offset, b"k", b"vv") for offset in (0, 1, 63, 64, 65, 32768, 65536, 100_000)]
    rows += [("a", 0, 64, b"k", b"vv")]  # offset 64 twice
    rows += [("a", 1, offset, None, b"v" * 3) for offset in range(5, 40_005, 1000)]
    rows += [("b", 0, 7, b"kk", None)]
    schema = "topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY"
    with connect_mode():
        session = remote_session(spark_connection(spark_connect).connect_url())
        try:
            summary = check.summarize(session.createDataFrame(rows, schema))
        finally:
            session.stop()
    assert summary == [
        {
            "topic": "a",
            "partition": 0,
            "records": 9,
            "min_offset": 0,
            "max_offset": 100_000,
            "distinct_offsets": 8,
            "payload_bytes": 27,
        },
        {
            "topic": "a",
            "partition": 1,
            "records": 40,
            "min_offset": 5,
            "max_offset": 39_005,
            "distinct_offsets": 40,
            "payload_bytes": 120,
        },
        {
            "topic": "b",
            "partition": 0,
            "records": 1,
            "min_offset": 7,
            "max_offset": 7,
            "distinct_offsets": 1,
            "payload_bytes": 2,
        },
    ]
    planned = [{"topic": "a", "partition": 0, "start": 0, "end": 100_001}]
    assert check.contract.range_problems(planned, summary[:1]) == ["a-0: 9 records but 8 distinct offsets"]


DICTIONARY_COLUMNS = {"value": False, "offset": False, "timestamp": False, "topic": True, "partition": True}


@pytest.mark.parametrize("mode", ["spark-submit", "spark-connect"])
def test_a_large_batch_counts_its_bytes_exactly_while_writing(stack, spark_connect, ledger, make_topic, tmp_path, mode):
    """The key + value bytes are an observed metric of the write (the files are proved from their footers, the
    values not read again): the ledger's bytes per partition are exact, in a spark-submit driver (classic
    session) and on the Connect server."""
    topic = make_topic(partitions=3)
    spec = build_spec(f"bytes_{mode[6:]}", [topic], str(tmp_path / "out"))
    produced = produce(stack.bootstrap_servers, topic, 51_000, 3, "a-")
    assert run_once(ledger, spec, stack, spark_connect if mode == "spark-connect" else None).records == 51_000
    expected = payload_per_partition(produced, 3)
    assert range_bytes(ledger, spec.name) == [(p, 17_000, expected[p]) for p in range(3)]
    # the columns that hold a new value in every record are written without a dictionary; the others keep one
    files = sorted((tmp_path / "out").rglob("*.parquet"))
    assert files
    for file in files:
        meta = pq.ParquetFile(file).metadata
        chunks = {meta.schema.column(i).path: meta.row_group(0).column(i) for i in range(meta.num_columns)}
        assert {path: chunk.has_dictionary_page for path, chunk in chunks.items() if path in DICTIONARY_COLUMNS} == (
            DICTIONARY_COLUMNS
        )
