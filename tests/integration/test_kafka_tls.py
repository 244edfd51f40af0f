"""Kafka as production clusters run it: TLS and SCRAM-SHA-512, on the stack's SASL_SSL listener.

The broker's SASL_SSL listener serves a certificate of a CA made for the stack and accepts one
SCRAM-SHA-512 user. The Kafka connection is the apache-kafka provider's ``kafka`` type with the
settings a user gives for such a cluster: ``security.protocol`` SASL_SSL, ``sasl.mechanism``
SCRAM-SHA-512, ``sasl.username``/``sasl.password`` and ``ssl.ca.location``. Records with unique ids
are produced through that listener; the plan step asks it for offsets (confluent-kafka) and Spark's
Kafka consumer reads through it, with the CA's certificates handed over as PEM text: one batch by
spark-submit, two on the warm Spark Connect server, each with exact ledger ranges and every id once,
and one read with the CA file deleted before Spark starts (no path needs to exist where Spark runs).
A wrong password and a CA that did not sign the broker's certificate fail the plan step and the read
step (at its check of the log start offsets, before Spark starts) with the package's authentication
errors, without retries, and change nothing in the ledger. (Spark's own classification of these
failures: test_security.py and tests/unit/test_spark_failures.py.)
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors

import devstack
from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.clients.kafka_config import java_client_properties
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import NOT_RETRYABLE, KafkaAuthenticationError
from airflow_kafka_offsets.operators import KafkaBatchCommitOperator, KafkaBatchPlanOperator, KafkaBatchSparkOperator
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink
from airflow_kafka_offsets.spark.settings import SparkSettings

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce

CONN_ID = "kafka_tls"
ACTOR = Actor(dag_id="tests", run_id="tls")
LEDGER_TABLES = ("pipelines", "cursors", "batches", "batch_ranges", "attempts", "audit")


def kafka_connection(monkeypatch, conn_id: str, extra: dict[str, str]) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka", "extra": extra}))
    return conn_id


@pytest.fixture()
def tls_connection(stack, monkeypatch) -> str:
    """The SASL_SSL listener as a ``kafka`` connection: SCRAM-SHA-512 over TLS, the stack's CA."""
    config = stack.sasl_ssl_client_config()
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert Path(config["ssl.ca.location"]).is_file()
    return kafka_connection(monkeypatch, CONN_ID, config)


def produce_tls(stack, topic: str, count: int, partitions: int, tag: str) -> list[dict]:
    """Records with unique ids, produced through the SASL_SSL listener."""
    return produce(
        stack.sasl_ssl_bootstrap_servers, topic, count, partitions, tag, client_config=stack.sasl_ssl_client_config()
    )


def ledger_state(ledger) -> dict[str, list[str]]:
    with ledger.transaction() as tx:
        return {
            table: sorted(r[0] for r in tx.fetchall(f"SELECT row_to_json(t)::text FROM {{s}}.{table} t"))
            for table in LEDGER_TABLES
        }


def ingest(pipeline: str, schema: str, kafka_conn_id: str, topic: str, output: Path, spark_conn_id: str) -> dict:
    """Plan, read and commit one batch through the operators, as the task group runs them."""
    common = {"pipeline": pipeline, "ledger_schema": schema, "kafka_conn_id": kafka_conn_id}
    planned = KafkaBatchPlanOperator(task_id="plan", topics=[topic], output_root=str(output), **common).execute({})
    batch_id = planned["batch_id"]
    read = KafkaBatchSparkOperator(task_id="read", batch_id=batch_id, spark_conn_id=spark_conn_id, **common).execute({})
    committed = KafkaBatchCommitOperator(task_id="commit", batch_id=batch_id, **common).execute(
        {"outlet_events": OutletEventAccessors()}
    )
    return {"planned": planned["records_planned"], "read": read["records_read"], **committed}


def not_retried(error: BaseException, exc_type: type[BaseException]) -> BaseException:
    """The operator failed the task without retries (AirflowFailException) for the package's ``exc_type``."""
    from airflow_kafka_offsets.operators.base import AirflowFailException

    assert isinstance(error, AirflowFailException), f"{error!r} lets Airflow retry the task"
    cause = error.__cause__
    assert isinstance(cause, exc_type), f"{cause!r} is not a {exc_type.__name__}"
    assert isinstance(cause, NOT_RETRYABLE)
    return cause


def other_ca(directory: Path) -> str:
    """A CA of its own (it did not sign the broker's certificate), as a PEM file."""
    key, cert = directory / "other-ca.key", directory / "other-ca.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-noenc",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=not the stack's CA",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(cert)


def test_a_batch_plans_and_reads_through_sasl_ssl_with_spark_submit(
    stack, ledger, schema, make_topic, tmp_path, tls_connection
):
    topic = make_topic(partitions=3)
    produced = produce_tls(stack, topic, 300, 3, "tls-")
    pipeline = f"tls_submit_{schema}"

    result = ingest(pipeline, schema, tls_connection, topic, tmp_path / "out", "spark_default")

    assert (result["planned"], result["read"], result["batch_id"], result["records"]) == (300, 300, 1, 300)
    assert ledger_ranges(ledger, pipeline) == [(1, "committed", topic, p, 0, 0, 100, 100) for p in range(3)]
    assert ledger.cursors(pipeline) == {TP(topic, p): 100 for p in range(3)}
    assert_exactly_once(committed_rows(ledger, pipeline), produced)


def test_batches_on_the_spark_connect_server_read_through_sasl_ssl(
    stack, spark_connect, ledger, schema, make_topic, tmp_path, tls_connection, capfd, caplog
):
    caplog.set_level("DEBUG")
    topic = make_topic(partitions=2)
    pipeline = f"tls_connect_{schema}"
    output = tmp_path / "out"
    first = produce_tls(stack, topic, 120, 2, "c1-")
    assert ingest(pipeline, schema, tls_connection, topic, output, spark_connect)["records"] == 120
    second = produce_tls(stack, topic, 50, 2, "c2-")
    assert ingest(pipeline, schema, tls_connection, topic, output, spark_connect)["records"] == 50

    assert ledger_ranges(ledger, pipeline) == [
        (1, "committed", topic, 0, 0, 0, 60, 60),
        (1, "committed", topic, 1, 0, 0, 60, 60),
        (2, "committed", topic, 0, 60, 60, 85, 25),
        (2, "committed", topic, 1, 60, 60, 85, 25),
    ]
    assert ledger.cursors(pipeline) == {TP(topic, 0): 85, TP(topic, 1): 85}
    assert_exactly_once(committed_rows(ledger, pipeline), first + second)

    # the password went to the server as a reader option, over the Connect channel only
    password = stack.sasl_ssl_password
    captured = capfd.readouterr()
    assert password not in captured.out + captured.err + caplog.text
    server_log_dir = Path(devstack.status()["services"]["spark_connect"]["log"]).parent
    server_files = [p for p in server_log_dir.rglob("*") if p.is_file() and p.name != "token"]
    assert [str(p) for p in server_files if password.encode() in p.read_bytes()] == []


def test_spark_reads_through_sasl_ssl_with_no_ca_file_where_it_runs(
    stack, spark_connect, ledger, schema, make_topic, tmp_path
):
    """The CA's certificates reach Spark's consumer as text: the read works with the CA file gone
    once the Kafka settings were made (as on executors that never had it)."""
    topic = make_topic(partitions=2)
    produced = produce_tls(stack, topic, 30, 2, "nofile-")
    ca_copy = tmp_path / "worker-only-ca.pem"
    ca_copy.write_text(Path(stack.ssl_ca_file).read_text())
    config = {**stack.sasl_ssl_client_config(), "ssl.ca.location": str(ca_copy)}
    pipeline = f"tls_nofile_{schema}"
    spec = build_spec(pipeline, [topic], str(tmp_path / "out"))
    sink = LocalDirectorySink(spec.output_root)
    planned = plan_batch(ledger, spec, KafkaOffsetsClient(config).offsets, sink, ACTOR).plan
    assert planned is not None and planned.records_planned == 30
    properties = java_client_properties(config)
    ca_copy.unlink()
    assert str(ca_copy) not in json.dumps(properties)

    run_batch(ledger, sink, planned, settings_runner(SparkSettings(conn_id=spark_connect)), properties, ACTOR)

    assert commit_batch(ledger, sink, pipeline, planned.batch_id, ACTOR).records == 30
    assert ledger_ranges(ledger, pipeline) == [(1, "committed", topic, p, 0, 0, 15, 15) for p in range(2)]
    assert_exactly_once(committed_rows(ledger, pipeline), produced)


def test_a_wrong_password_fails_plan_and_read_without_retries_and_changes_nothing(
    stack, spark_connect, ledger, schema, make_topic, tmp_path, tls_connection, monkeypatch, capfd, caplog
):
    """Plan: confluent-kafka's SCRAM login is refused; read (the connection edited after the plan):
    Spark's Kafka consumer's login is refused. Both fail the task at once, and the ledger stays put."""
    caplog.set_level("INFO")
    wrong = f"Wrong-{uuid.uuid4().hex}"
    bad = kafka_connection(monkeypatch, "kafka_tls_wrong_password", stack.sasl_ssl_client_config(password=wrong))
    topic = make_topic(partitions=2)
    produce_tls(stack, topic, 40, 2, "w-")
    pipeline = f"tls_wrong_{schema}"
    common = {"pipeline": pipeline, "ledger_schema": schema}
    before = ledger_state(ledger)

    started = time.monotonic()
    with pytest.raises(Exception) as failed:
        KafkaBatchPlanOperator(
            task_id="plan", topics=[topic], output_root=str(tmp_path / "out"), kafka_conn_id=bad, **common
        ).execute({})
    elapsed = time.monotonic() - started
    cause = not_retried(failed.value, KafkaAuthenticationError)
    message = str(cause)
    assert stack.sasl_ssl_bootstrap_servers in message and "rejected the client's credentials" in message
    assert "SCRAM-SHA-512" in message and "sasl.password" in message
    assert elapsed < 20, f"took {elapsed:.0f}s: the refused login should end the wait early"
    assert ledger_state(ledger) == before

    # the plan with the right password; then the read with the wrong one, on the Connect server
    planned = KafkaBatchPlanOperator(
        task_id="plan", topics=[topic], output_root=str(tmp_path / "out"), kafka_conn_id=tls_connection, **common
    ).execute({})
    assert (planned["batch_id"], planned["records_planned"]) == (1, 40)
    cursors = ledger.cursors(pipeline)
    with pytest.raises(Exception) as failed:
        KafkaBatchSparkOperator(
            task_id="read", batch_id=1, spark_conn_id=spark_connect, kafka_conn_id=bad, **common
        ).execute({})
    # the read step asks Kafka for the log start offsets before Spark starts: refused there, no attempt
    cause = not_retried(failed.value, KafkaAuthenticationError)
    message = str(cause)
    assert "rejected the client's credentials" in message and "SCRAM-SHA-512" in message
    assert ledger.cursors(pipeline) == cursors
    assert ledger.committed_batches(pipeline) == []
    with ledger.transaction() as tx:
        assert tx.planned_batch_id(pipeline) == 1
        assert tx.fetchall("SELECT state FROM {s}.attempts WHERE pipeline = %s", (pipeline,)) == []

    captured = capfd.readouterr()
    for secret in (wrong, stack.sasl_ssl_password):
        assert secret not in captured.out + captured.err + caplog.text
        assert secret not in json.dumps(ledger_state(ledger))


def test_a_ca_that_did_not_sign_the_brokers_certificate_is_refused_at_once(
    stack, spark_connect, ledger, schema, make_topic, tmp_path, tls_connection, monkeypatch
):
    """Trust is checked, by confluent-kafka and by Spark's consumer alike: a connection naming
    another CA fails the plan and the read without retries."""
    untrusted = {**stack.sasl_ssl_client_config(), "ssl.ca.location": other_ca(tmp_path)}
    bad = kafka_connection(monkeypatch, "kafka_tls_other_ca", untrusted)
    topic = make_topic(partitions=1)
    produce_tls(stack, topic, 10, 1, "ca-")
    pipeline = f"tls_ca_{schema}"
    common = {"pipeline": pipeline, "ledger_schema": schema}
    before = ledger_state(ledger)

    started = time.monotonic()
    with pytest.raises(Exception) as failed:
        KafkaBatchPlanOperator(
            task_id="plan", topics=[topic], output_root=str(tmp_path / "out"), kafka_conn_id=bad, **common
        ).execute({})
    cause = not_retried(failed.value, KafkaAuthenticationError)
    assert "certificate verify failed" in str(cause) and "ssl.ca.location" in str(cause)
    assert time.monotonic() - started < 20
    assert ledger_state(ledger) == before

    KafkaBatchPlanOperator(
        task_id="plan", topics=[topic], output_root=str(tmp_path / "out"), kafka_conn_id=tls_connection, **common
    ).execute({})
    cursors = ledger.cursors(pipeline)
    with pytest.raises(Exception) as failed:
        KafkaBatchSparkOperator(
            task_id="read", batch_id=1, spark_conn_id=spark_connect, kafka_conn_id=bad, **common
        ).execute({})
    cause = not_retried(failed.value, KafkaAuthenticationError)  # before Spark, as the plan step
    assert "certificate verify failed" in str(cause) and "ssl.ca.location" in str(cause)
    assert ledger.cursors(pipeline) == cursors and ledger.committed_batches(pipeline) == []
