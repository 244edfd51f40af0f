"""Bad configuration on the real stack: every mistake gives a specific error naming the problem,
and leaves the ledger (cursors, batches, attempts, audit) and the output tree exactly as they were.

Unknown topic, unreachable broker, wrong SASL credentials, missing Airflow connections (Kafka,
PostgreSQL, Spark), an output root that cannot be written, a Spark connection that is missing (the
Spark provider would silently fall back to YARN), a ledger migrated by a newer package, and
hostile schema, pipeline and topic names. None of these tests runs spark-submit.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec, validate_pipeline_name
from airflow_kafka_offsets.errors import (
    ConfigurationError,
    InvalidPipelineSpecError,
    KafkaAuthenticationError,
    KafkaUnavailableError,
    LedgerSchemaTooNewError,
    OutputLocationError,
    UnknownTopicError,
)
from airflow_kafka_offsets.hooks import LedgerHook
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.ledger.schema import SCHEMA_VERSION
from airflow_kafka_offsets.operators import (
    KafkaBatchCommitOperator,
    KafkaBatchPlanOperator,
    KafkaBatchSparkOperator,
)
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink

from .helpers import produce, refused

ACTOR = Actor(dag_id="tests", run_id="bad-config")
LEDGER_TABLES = ("schema_version", "pipelines", "cursors", "batches", "batch_ranges", "attempts", "audit")
HOSTILE_SCHEMAS = [
    "x; DROP TABLE y",
    'kafka_offsets"; DROP SCHEMA public CASCADE; --',
    "x' OR '1'='1",
    "Kafka_Offsets",  # would need quoting: refused rather than case-folded
    "pg_catalog",
    "../../etc",
    "",
]
HOSTILE_PIPELINES = ["x; DROP TABLE y", "../../etc", "..", ".", "a/b", "/etc", ".hidden", "x'--", "name\n", ""]


# -- state snapshots ---------------------------------------------------------------------------


def ledger_state(ledger: Ledger) -> dict[str, list[str]]:
    """Every row of every ledger table, as JSON text (what 'unchanged' is checked against)."""
    with ledger.transaction() as tx:
        return {
            table: sorted(r[0] for r in tx.fetchall(f"SELECT row_to_json(t)::text FROM {{s}}.{table} t"))
            for table in LEDGER_TABLES
        }


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content hash ('dir' for directories)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


@dataclass
class Baseline:
    """A pipeline with one committed batch (cursors at offset 5 per partition) and 10 newer records."""

    ledger: Ledger
    schema: str
    topic: str
    pipeline: str
    root: Path

    def plan_kwargs(self, **overrides):
        kwargs = dict(
            task_id="plan",
            pipeline=self.pipeline,
            topics=[self.topic],
            output_root=str(self.root),
            ledger_schema=self.schema,
            starting_offsets="latest",
        )
        kwargs.update(overrides)
        return kwargs

    def state(self) -> tuple[dict, dict]:
        return ledger_state(self.ledger), tree(self.root)

    def cursors(self) -> dict[TP, int]:
        return self.ledger.cursors(self.pipeline)


@pytest.fixture()
def baseline(stack, ledger, schema, make_topic, tmp_path) -> Baseline:
    topic = make_topic(partitions=2)
    root = tmp_path / "out"
    root.mkdir()
    (root / "KEEP.txt").write_text("output written before the test; must survive untouched\n")
    produce(stack.bootstrap_servers, topic, 10, partitions=2)
    pipeline = "orders"
    spec = build_spec(pipeline, [topic], str(root), starting_offsets="latest")
    sink = LocalDirectorySink(str(root))
    kafka = KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})
    first = plan_batch(ledger, spec, kafka.offsets, sink, ACTOR).plan
    assert first is not None and not first.readable_ranges  # starts at the end: cursors only, no Spark
    commit_batch(ledger, sink, pipeline, first.batch_id, ACTOR)
    produce(stack.bootstrap_servers, topic, 10, partitions=2)
    base = Baseline(ledger, schema, topic, pipeline, root)
    assert base.cursors() == {TP(topic, 0): 5, TP(topic, 1): 5}
    return base


def kafka_conn(monkeypatch, conn_id: str, extra: dict) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka", "extra": extra}))
    return conn_id


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def no_spark_submit(monkeypatch):
    """Fail loudly if anything gets as far as running spark-submit."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    calls = []

    def refuse(self, application="", **kwargs):
        calls.append(application)
        raise AssertionError("spark-submit must not run for a bad configuration")

    monkeypatch.setattr(SparkSubmitHook, "submit", refuse)
    return calls


# -- Kafka --------------------------------------------------------------------------------------


def test_unknown_topic_is_named_and_nothing_changes(baseline):
    missing = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    before = baseline.state()
    op = KafkaBatchPlanOperator(**baseline.plan_kwargs(pipeline="orders_new", topics=[baseline.topic, missing]))
    with refused(UnknownTopicError, match=f"{missing}.* not found in Kafka"):
        op.execute({})
    # the new pipeline was rolled back with the failed plan
    assert baseline.state() == before


def test_unreachable_broker_fails_within_the_timeout_naming_the_address(baseline, monkeypatch):
    address = f"127.0.0.1:{closed_port()}"
    conn = kafka_conn(monkeypatch, "kafka_unreachable", {"bootstrap.servers": address})
    before = baseline.state()
    op = KafkaBatchPlanOperator(**baseline.plan_kwargs(kafka_conn_id=conn, kafka_timeout_s=3))
    started = time.monotonic()
    with refused(KafkaUnavailableError, match=rf"Kafka at {address} did not answer within 3s") as err:
        op.execute({})
    assert not isinstance(err.value, KafkaAuthenticationError)
    assert "Connection refused" in str(err.value)  # librdkafka's own reason, from the error callback
    assert time.monotonic() - started < 60  # bounded by the timeout, not librdkafka's retries
    assert baseline.state() == before


def test_wrong_sasl_credentials_fail_fast_naming_authentication(baseline, stack, monkeypatch):
    wrong = f"not-the-password-{uuid.uuid4().hex[:6]}"
    conn = kafka_conn(monkeypatch, "kafka_wrong_password", stack.sasl_client_config(password=wrong))
    before = baseline.state()
    op = KafkaBatchPlanOperator(**baseline.plan_kwargs(kafka_conn_id=conn, kafka_timeout_s=60))
    started = time.monotonic()
    with refused(KafkaAuthenticationError, match="rejected the client's credentials") as err:
        op.execute({})
    elapsed = time.monotonic() - started
    message = str(err.value)
    assert isinstance(err.value, KafkaUnavailableError)  # callers catching the broader error still do
    assert stack.sasl_bootstrap_servers in message
    assert "Invalid username or password" in message and "sasl.password" in message
    assert wrong not in message and stack.sasl_password not in message
    assert elapsed < 60, f"took {elapsed:.0f}s: the authentication failure should end the wait early"
    assert baseline.state() == before


def test_right_sasl_credentials_plan_through_the_airflow_connection(baseline, stack, monkeypatch):
    """Control for the test above: the same listener and user with the right password work."""
    conn = kafka_conn(monkeypatch, "kafka_sasl", stack.sasl_client_config())
    result = KafkaBatchPlanOperator(**baseline.plan_kwargs(kafka_conn_id=conn)).execute({})
    assert result["batch_id"] == 2 and result["records_planned"] == 10


# -- missing or incomplete Airflow connections ----------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"kafka_conn_id": "kafka_missing"}, "Kafka connection 'kafka_missing' is not defined in Airflow"),
        (
            {"kafka_conn_id": "kafka_no_bootstrap"},
            r"Kafka connection 'kafka_no_bootstrap' cannot be used: config\['bootstrap.servers'\] must be provided",
        ),
        ({"postgres_conn_id": "postgres_missing"}, "PostgreSQL connection 'postgres_missing' is not defined"),
    ],
)
def test_plan_refuses_a_missing_connection(baseline, monkeypatch, overrides, match):
    kafka_conn(monkeypatch, "kafka_no_bootstrap", {"security.protocol": "PLAINTEXT"})
    before = baseline.state()
    with refused(ConfigurationError, match=match):
        KafkaBatchPlanOperator(**baseline.plan_kwargs(**overrides)).execute({})
    assert baseline.state() == before


def test_read_refuses_missing_spark_or_kafka_connection_before_spark_submit(
    baseline, stack, monkeypatch, no_spark_submit
):
    """Without its connection the Spark provider would submit to master 'yarn': refused instead,
    before the ledger records an attempt and before spark-submit runs."""
    kafka = KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})
    spec = build_spec(baseline.pipeline, [baseline.topic], str(baseline.root), starting_offsets="latest")
    planned = plan_batch(baseline.ledger, spec, kafka.offsets, LocalDirectorySink(str(baseline.root)), ACTOR).plan
    assert planned is not None and planned.batch_id == 2 and planned.readable_ranges
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_MISSING", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_NO_HOST", json.dumps({"conn_type": "spark"}))
    before = baseline.state()
    cases = [
        ({"spark_conn_id": "spark_missing"}, r"Spark connection 'spark_missing' is not defined.*default to YARN"),
        ({"spark_conn_id": "spark_no_host"}, r"Spark connection 'spark_no_host' has no host"),
        ({"kafka_conn_id": "kafka_missing"}, r"Kafka connection 'kafka_missing' is not defined in Airflow"),
    ]
    for overrides, match in cases:
        op = KafkaBatchSparkOperator(
            task_id="read",
            pipeline=baseline.pipeline,
            ledger_schema=baseline.schema,
            spark_jars=list(stack.connector_jars),
            **overrides,
        )
        with refused(ConfigurationError, match=match):
            op.execute({})
        assert baseline.state() == before, overrides
    assert no_spark_submit == []
    assert not (baseline.root / "_staging" / "orders" / "batch=000000000002").exists()
    with baseline.ledger.transaction() as tx:
        assert tx.fetchall("SELECT attempt_id FROM {s}.attempts") == []
        assert tx.planned_batch_id(baseline.pipeline) == 2
    assert baseline.cursors() == {TP(baseline.topic, 0): 5, TP(baseline.topic, 1): 5}


# -- output location -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "exc", "match"),
    [
        ("{tmp}/a-regular-file/out", OutputLocationError, "output root .*a-regular-file/out is not writable"),
        ("/proc/ako-not-writable/out", OutputLocationError, "output root /proc/ako-not-writable/out is not writable"),
        ("relative/out", OutputLocationError, "must be an absolute path or file:// URI"),
        ("s3://no-such-bucket/out", OutputLocationError, "S3 bucket 'no-such-bucket' does not exist"),
        ("   ", InvalidPipelineSpecError, "needs an output_root"),
    ],
)
def test_unusable_output_root_is_refused_before_anything_is_planned(
    stack, ledger, schema, make_topic, tmp_path, root, exc, match
):
    """(Tests run as root, so chmod cannot make a directory unwritable: a path under a regular file
    or under /proc cannot be created by anyone.)"""
    (tmp_path / "a-regular-file").write_text("not a directory\n")
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 3, partitions=1)
    before = ledger_state(ledger), tree(tmp_path)
    op = KafkaBatchPlanOperator(
        task_id="plan", pipeline="fresh", topics=[topic], output_root=root.format(tmp=tmp_path), ledger_schema=schema
    )
    with refused(exc, match=match):
        op.execute({})
    assert (ledger_state(ledger), tree(tmp_path)) == before


def test_output_root_replaced_by_a_file_is_refused_and_nothing_changes(baseline):
    """An existing pipeline whose output root stopped being a directory (a mount gone wrong)."""
    moved = baseline.root.with_name("out-moved")
    baseline.root.rename(moved)
    baseline.root.write_text("not a directory any more\n")
    before = ledger_state(baseline.ledger)
    with refused(OutputLocationError, match=f"output root {baseline.root} is not writable"):
        KafkaBatchPlanOperator(**baseline.plan_kwargs()).execute({})
    assert ledger_state(baseline.ledger) == before
    assert baseline.root.read_text() == "not a directory any more\n"


def test_paths_cannot_escape_the_output_root(baseline, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (baseline.root / "evil").symlink_to(outside, target_is_directory=True)
    sink = LocalDirectorySink(str(baseline.root))
    with refused(OutputLocationError, match="escapes the output root"):
        sink.output_uri("evil", 1)
    with refused(OutputLocationError, match="escapes the output root"):
        sink.read_report(f"file://{outside}")
    with refused(OutputLocationError, match="escapes the output root"):
        sink.publish_directory(f"file://{outside}", sink.output_uri(baseline.pipeline, 99))
    with refused(OutputLocationError, match="escapes the output root"):
        sink.publish_directory(sink.staging_uri(baseline.pipeline, 2, "a1"), f"file://{baseline.root}/../elsewhere")
    for name in HOSTILE_PIPELINES:
        with refused(InvalidPipelineSpecError, match="invalid pipeline name"):
            sink.output_uri(name, 1)
        with refused(InvalidPipelineSpecError, match="invalid pipeline name"):
            sink.staging_uri(name, 1, "a1")
    # end to end: planning a pipeline whose directory is a symlink out of the root plans nothing
    before = baseline.state()
    with refused(OutputLocationError, match="escapes the output root"):
        KafkaBatchPlanOperator(**baseline.plan_kwargs(pipeline="evil")).execute({})
    assert baseline.state() == before
    assert list(outside.iterdir()) == []


# -- ledger ----------------------------------------------------------------------------------------


def test_ledger_from_a_newer_package_is_refused_untouched(baseline, stack):
    with baseline.ledger.transaction() as tx:
        tx.execute("UPDATE {s}.schema_version SET version = %s, package_version = '99.0.0'", (SCHEMA_VERSION + 1,))
    before = baseline.state()
    newer = (
        rf"ledger schema '{baseline.schema}' is at version {SCHEMA_VERSION + 1}, newer than version "
        rf"{SCHEMA_VERSION} known to airflow-kafka-offsets .*: upgrade the package"
    )
    with refused(LedgerSchemaTooNewError, match=newer):
        KafkaBatchPlanOperator(**baseline.plan_kwargs()).execute({})
    for op in (
        KafkaBatchSparkOperator(task_id="read", pipeline=baseline.pipeline, ledger_schema=baseline.schema),
        KafkaBatchCommitOperator(task_id="commit", pipeline=baseline.pipeline, ledger_schema=baseline.schema),
    ):
        with refused(LedgerSchemaTooNewError, match=newer):
            op.execute({})
    with refused(LedgerSchemaTooNewError, match=newer):
        LedgerHook(schema=baseline.schema).get_conn()
    with refused(LedgerSchemaTooNewError, match=newer):
        Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=baseline.schema).migrate()
    assert baseline.state() == before  # no migration ran, no row moved


@pytest.mark.parametrize("hostile", HOSTILE_SCHEMAS)
def test_hostile_schema_names_are_refused_before_any_sql(hostile, stack, monkeypatch):
    connects = []

    def connect():
        connects.append(1)
        return psycopg2.connect(stack.pg_dsn())

    with refused(InvalidPipelineSpecError, match="invalid ledger schema name"):
        Ledger(connect, schema=hostile)
    with refused(InvalidPipelineSpecError, match="invalid ledger schema name"):
        LedgerHook(schema=hostile).get_conn()
    if hostile:  # an empty [kafka_offsets] ledger_schema means the default schema
        monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", hostile)
        with refused(InvalidPipelineSpecError, match="invalid ledger schema name"):
            KafkaBatchCommitOperator(task_id="commit", pipeline="orders").execute({})
    with refused(InvalidPipelineSpecError, match="invalid ledger schema name"):
        KafkaBatchCommitOperator(task_id="commit", pipeline="orders", ledger_schema=hostile or "-").execute({})
    assert connects == []


def test_hostile_names_never_reach_sql_or_paths(baseline, stack):
    """Pipeline and topic names are validated before any SQL (where they are parameters anyway)
    or path use; a canary table named in the injections survives."""
    with baseline.ledger.transaction() as tx:
        tx.execute("CREATE TABLE {s}.y (n int)")
    before = baseline.state()
    for name in HOSTILE_PIPELINES:
        with refused(InvalidPipelineSpecError, match="invalid pipeline name"):
            validate_pipeline_name(name)
        with refused(InvalidPipelineSpecError, match="invalid pipeline name"):
            KafkaBatchPlanOperator(**baseline.plan_kwargs(pipeline=name)).execute({})
        for op_class, task_id in ((KafkaBatchSparkOperator, "read"), (KafkaBatchCommitOperator, "commit")):
            with refused(InvalidPipelineSpecError, match="invalid pipeline name"):
                op_class(task_id=task_id, pipeline=name, ledger_schema=baseline.schema).execute({})
    for topic in ("t; DROP TABLE y", "../../etc", "a/b", "x'--", ".."):
        with refused(InvalidPipelineSpecError, match="invalid Kafka topic name"):
            KafkaBatchPlanOperator(**baseline.plan_kwargs(topics=[topic])).execute({})
    assert baseline.state() == before
    with baseline.ledger.transaction() as tx:
        assert tx.fetchone("SELECT to_regclass(%s)", (f"{tx.s}.y",))[0] is not None
    assert sorted(os.listdir(baseline.root)) == ["KEEP.txt", "_staging", "orders"]
    assert os.listdir(baseline.root / "orders") == ["batch=000000000001"]  # the baseline's (empty) batch
