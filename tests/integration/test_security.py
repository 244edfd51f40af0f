"""Kafka credentials reach confluent-kafka and Spark but never argv, the process list or the logs.

The local broker has a SASL_PLAINTEXT listener (mechanism PLAIN) and a SASL_SSL listener (SCRAM-SHA-512,
a certificate of the stack's own CA), each with a random password per stack. The example DAG runs
through ``dag.test()`` with ``kafka_default`` pointing at one listener, then the other; the
connection lives in Airflow's metadata database, as in production, so no environment variable
carries the password either. While the DAG runs, every process's command line and environment is
sampled (``/proc``, and ``ps``) and must never hold the password (nor, over SASL_SSL, the broker's
key store password or the CA's certificate text); the task log (with the logged spark-submit command
line and Spark's own output, here including the Kafka client's config dump and the Kafka source's
debug log), Spark's event log, the ledger and the output must not hold the passwords either. The
job file that carries the settings to Spark is private and gone afterwards; over SASL_SSL it holds
the CA's certificates as PEM text (no path that would have to exist where Spark runs) and no
private key. A run with a wrong password fails in Spark naming the authentication failure, and
changes nothing. Three spark-submits in all.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.clients.kafka_config import java_client_properties
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkJobError
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink
from airflow_kafka_offsets.spark import submit as spark_module
from airflow_kafka_offsets.spark.settings import SparkSettings

from .helpers import assert_exactly_once, committed_rows, produce

# Serial: it samples every process's argv and environment for the Kafka password other tests also use.
pytestmark = pytest.mark.serial

DAG_ID = "kafka_ingest_example"
ACTOR = Actor(dag_id="tests", run_id="security")
LEDGER_TABLES = ("pipelines", "cursors", "batches", "batch_ranges", "attempts", "audit")

# Spark's own logging, louder than the package's default WARN where secrets could leak: the Kafka
# clients' config dumps and the Kafka source's debug log (spark.log.level only sets the root level).
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c: %m%n%ex
logger.consumer.name = org.apache.kafka.clients.consumer.ConsumerConfig
logger.consumer.level = info
logger.admin.name = org.apache.kafka.clients.admin.AdminClientConfig
logger.admin.level = info
logger.source.name = org.apache.spark.sql.kafka010
logger.source.level = debug
"""


@dataclass
class ProcessWatch:
    """Samples every process's argv and environment (and ``ps``) in a thread until stopped."""

    secret: bytes
    marker: bytes  # in the command line of this test's Spark processes
    also: tuple[bytes, ...] = ()  # more that must never be in argv or an environment
    interval_s: float = 0.2
    leaks: list[tuple[str, int, str]] = field(default_factory=list)
    samples: int = 0
    ps_samples: int = 0
    spark_seen: int = 0
    spark_cmdlines: set[str] = field(default_factory=set)
    job_copies: dict[str, int] = field(default_factory=dict)  # file name -> mode
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ProcessWatch:
        self._thread = threading.Thread(target=self._run, name="process-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=60)
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()
            if self.samples % 10 == 0:
                self.sample_ps()

    def sample(self) -> None:
        self.samples += 1
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
                environ = (proc / "environ").read_bytes()
            except OSError:  # gone meanwhile
                continue
            readable = cmdline.replace(b"\0", b" ").decode("utf-8", "replace")
            if self.marker in cmdline:
                self.spark_seen += 1
                self.spark_cmdlines.add(readable)
            if any(secret in cmdline for secret in (self.secret, *self.also)):
                self.leaks.append(("argv", int(proc.name), readable[:300]))
            if any(secret in environ for secret in (self.secret, *self.also)):
                self.leaks.append(("environment", int(proc.name), readable[:300]))
        for copy in Path("/tmp").glob("spark-*/userFiles-*/kafka-batch-*.json"):  # Spark's copies (--files)
            try:
                self.job_copies[copy.name] = stat.S_IMODE(copy.stat().st_mode)
            except OSError:
                pass

    def sample_ps(self) -> None:
        out = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, timeout=30).stdout
        self.ps_samples += 1
        for line in out.splitlines():
            if any(secret in line for secret in (self.secret, *self.also)):
                self.leaks.append(("ps", int(line.split()[0]), line.decode("utf-8", "replace")[:300]))


@dataclass
class JobFileSpy:
    """Records the job file the submitter writes and how private it is when spark-submit starts."""

    paths: list[Path] = field(default_factory=list)
    at_submit: list[dict] = field(default_factory=list)


@pytest.fixture()
def job_file_spy(monkeypatch) -> JobFileSpy:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    spy = JobFileSpy()
    write_private, submit = spark_module._write_private, SparkSubmitHook.submit

    def recording_write(path, payload):
        write_private(path, payload)
        spy.paths.append(Path(path))

    def checking_submit(self, application="", **kwargs):
        path = spy.paths[-1]
        spy.at_submit.append(
            {
                "file_mode": stat.S_IMODE(path.stat().st_mode),
                "dir_mode": stat.S_IMODE(path.parent.stat().st_mode),
                "owner": path.stat().st_uid,
                "text": path.read_text(),
            }
        )
        return submit(self, application, **kwargs)

    monkeypatch.setattr(spark_module, "_write_private", recording_write)
    monkeypatch.setattr(SparkSubmitHook, "submit", checking_submit)
    return spy


@pytest.fixture()
def spark_conf_dir(tmp_path, monkeypatch) -> Path:
    """SPARK_CONF_DIR with an uncompressed event log and the louder logging above."""
    conf = tmp_path / "spark-conf"
    events = tmp_path / "spark-events"
    conf.mkdir()
    events.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\nspark.eventLog.compress false\n"
    )
    (conf / "log4j2.properties").write_text(LOG4J2)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    return events


@dataclass(frozen=True)
class Listener:
    """A secured listener of the stack's broker, as the Kafka connection reaches it."""

    protocol: str
    mechanism: str
    config: dict[str, str] = field(repr=False)
    password: str = field(repr=False)
    # SASL_SSL: the broker's key store password (never leaves the stack) and the CA's certificate
    keystore_password: str | None = field(default=None, repr=False)
    ca_certificate: str | None = field(default=None, repr=False)

    def never_in_processes(self) -> tuple[bytes, ...]:
        """Beyond the password, what no process's argv or environment may hold: the key store password
        and the CA's text (a line of its base64), which travels in the private job file only."""
        if self.ca_certificate is None or self.keystore_password is None:
            return ()
        ca_line = next(line for line in self.ca_certificate.splitlines() if line and not line.startswith("-----"))
        return self.keystore_password.encode(), ca_line.encode()


def listener(stack, protocol: str) -> Listener:
    if protocol == "SASL_PLAINTEXT":
        assert stack.sasl_bootstrap_servers, "the stack has no SASL listener (scripts/stack up adds it)"
        return Listener(protocol, "PLAIN", stack.sasl_client_config(), stack.sasl_password)
    assert stack.sasl_ssl_bootstrap_servers, "the stack has no SASL_SSL listener (scripts/stack up adds it)"
    ca = Path(stack.ssl_ca_file)
    return Listener(
        protocol,
        "SCRAM-SHA-512",
        stack.sasl_ssl_client_config(),
        stack.sasl_ssl_password,
        keystore_password=ca.with_name("broker-keystore-password").read_text().strip(),
        ca_certificate=ca.read_text(),
    )


# SASL_PLAINTEXT (PLAIN) runs with the long tests: its secret takes the same way as SASL_SSL's (SCRAM over TLS)
@pytest.fixture(params=[pytest.param("SASL_PLAINTEXT", marks=pytest.mark.long), "SASL_SSL"])
def secured_kafka_default(request, stack, airflow_db, monkeypatch) -> Iterator[Listener]:
    """``kafka_default`` -> a secured listener, stored in the Airflow metadata DB (not in the environment)."""
    from airflow.models import Connection
    from airflow.utils.session import create_session

    secured = listener(stack, request.param)
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_DEFAULT", raising=False)
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id == "kafka_default").delete()
        session.add(Connection(conn_id="kafka_default", conn_type="kafka", extra=json.dumps(secured.config)))
    yield secured
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id == "kafka_default").delete()


def ledger_text(ledger) -> str:
    with ledger.transaction() as tx:
        return "\n".join(
            r[0] for table in LEDGER_TABLES for r in tx.fetchall(f"SELECT row_to_json(t)::text FROM {{s}}.{table} t")
        )


def files_containing(root: Path, secret: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


def run_example_dag():
    from ..dagbag import DagBag

    bag = DagBag()
    assert not bag.import_errors, bag.import_errors
    dag_run = bag.get_dag(DAG_ID).test()
    assert dag_run.state == "success", f"DAG run ended {dag_run.state}"


def test_sasl_pipeline_through_airflow_keeps_the_password_out_of_argv_processes_and_logs(
    stack,
    ledger,
    schema,
    make_topic,
    tmp_path,
    monkeypatch,
    capfd,
    caplog,
    secured_kafka_default,
    spark_conf_dir,
    job_file_spy,
):
    secured = secured_kafka_default
    secret = secured.password.encode()
    topic = make_topic(partitions=3)
    pipeline = f"secured_{schema}"
    output = tmp_path / "out"
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC", topic)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE", pipeline)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT", str(output))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", schema)
    caplog.set_level("INFO")
    produced = produce(stack.bootstrap_servers, topic, 600, partitions=3)

    with ProcessWatch(secret, f"kafka-batch-{pipeline}-".encode(), also=secured.never_in_processes()) as watch:
        run_example_dag()

    # exactly once, read over the secured listener by both confluent-kafka (plan, consumer-group mirror) and Spark
    batches = ledger.committed_batches(pipeline)
    assert [b.records_committed for b in batches] == [600]
    assert_exactly_once(committed_rows(ledger, pipeline), produced)
    assert ledger.cursors(pipeline) == {TP(topic, p): 200 for p in range(3)}

    # the process list, sampled while Spark ran: never the password, in argv or environment
    assert watch.spark_seen > 0, "the sampler never saw this test's spark-submit running"
    assert watch.samples > 5 and watch.ps_samples > 0
    assert watch.leaks == [], watch.leaks[:3]
    assert any("--job-file" in c for c in watch.spark_cmdlines)

    # the job file: private while Spark runs, holding the secret (that is how it travels), then gone
    assert len(job_file_spy.paths) == len(job_file_spy.at_submit) == 1
    job_file, at_submit = job_file_spy.paths[0], job_file_spy.at_submit[0]
    assert at_submit["file_mode"] == 0o600 and at_submit["dir_mode"] == 0o700
    assert at_submit["owner"] == os.getuid()
    job = json.loads(at_submit["text"])
    assert job["kafka"]["bootstrap.servers"] == secured.config["bootstrap.servers"]
    assert (job["kafka"]["security.protocol"], job["kafka"]["sasl.mechanism"]) == (secured.protocol, secured.mechanism)
    assert secured.password in job["kafka"]["sasl.jaas.config"]
    assert "PRIVATE KEY" not in at_submit["text"]
    if secured.ca_certificate is not None:
        # the CA travels as PEM text in the job file: no path that must exist where Spark runs
        assert job["kafka"]["ssl.truststore.type"] == "PEM"
        assert job["kafka"]["ssl.truststore.certificates"] == secured.ca_certificate
        assert "ssl.truststore.location" not in job["kafka"] and stack.ssl_ca_file not in at_submit["text"]
    assert not job_file.exists() and not job_file.parent.exists()
    if job_file.name in watch.job_copies:  # Spark's local copy (local mode fetches --files too)
        assert watch.job_copies[job_file.name] & 0o077 & ~0o011 == 0, oct(watch.job_copies[job_file.name])
    leftovers = [str(p) for p in Path("/tmp").glob(f"spark-*/userFiles-*/{job_file.name}")]
    assert leftovers == [], f"Spark's copy of the job file outlived the run: {leftovers}"

    # the task log: the spark-submit command line, Spark's output and our partition tables
    captured = capfd.readouterr()
    log_text = captured.out + captured.err + caplog.text
    log_files = [p for p in Path(os.environ["AIRFLOW_HOME"], "logs").rglob("*") if p.is_file()]
    log_text += "".join(p.read_text(errors="replace") for p in log_files)
    submit_lines = [line for line in log_text.splitlines() if "Spark-Submit cmd" in line]
    assert submit_lines, "the spark-submit command line was not in the captured task log"
    assert all(f"--files {job_file}" in line and f"--job-file {job_file}" in line for line in submit_lines)
    assert not any(word in line for line in submit_lines for word in ("sasl.", "jaas", "LoginModule", "security."))
    assert "sasl.jaas.config = [hidden]" in log_text  # Spark's Kafka client got the JAAS config, masked
    assert 'password="*********(redacted)"' in log_text  # the Kafka source's debug log of its params
    assert f"security.protocol = {secured.protocol}" in log_text  # Spark's consumer, on this listener
    if secured.ca_certificate is not None:
        assert "ssl.truststore.certificates = [hidden]" in log_text  # the consumer got the CA, masked
    assert f"pipeline {pipeline}: committed batch 1" in log_text
    assert secured.password not in log_text
    assert "PRIVATE KEY" not in log_text
    assert secured.keystore_password is None or secured.keystore_password not in log_text

    # Spark's event log (environment, SQL plans, task events), the ledger and the output
    event_files = [p for p in spark_conf_dir.rglob("*") if p.is_file()]
    events = b"".join(p.read_bytes() for p in event_files)
    assert event_files and b"KafkaTable" in events  # the Kafka read's plan (the DataSource V2 scan) is in it
    assert files_containing(spark_conf_dir, secret) == []
    assert secured.password not in ledger_text(ledger)
    assert files_containing(output, secret) == []


def test_wrong_password_fails_in_spark_naming_authentication_and_changes_nothing(
    stack,
    ledger,
    make_topic,
    tmp_path,
    capfd,
    caplog,
):
    """A plan made with the right credentials, read by Spark with a wrong password (say the
    connection was edited in between): the attempt fails naming the authentication failure."""
    wrong = f"Wrong-{uuid.uuid4().hex}"
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 40, partitions=2)
    output = tmp_path / "out"
    spec = build_spec("sasl_wrong", [topic], str(output))
    sink = LocalDirectorySink(str(output))
    caplog.set_level("INFO")
    planned = plan_batch(ledger, spec, KafkaOffsetsClient(stack.sasl_client_config()).offsets, sink, ACTOR).plan
    assert planned is not None and planned.records_planned == 40
    cursors = ledger.cursors("sasl_wrong")
    submitter = settings_runner(SparkSettings(jars=stack.connector_jars))

    with ProcessWatch(wrong.encode(), marker=b"kafka-batch-sasl_wrong-") as watch:
        with pytest.raises(SparkJobError, match="Kafka rejected the credentials") as err:
            run_batch(
                ledger,
                sink,
                planned,
                submitter,
                java_client_properties(stack.sasl_client_config(password=wrong)),
                ACTOR,
            )

    message = str(err.value)
    assert "SaslAuthenticationException" in message and "Invalid username or password" in message
    assert wrong not in message
    assert watch.spark_seen > 0 and watch.leaks == []
    captured = capfd.readouterr()
    assert wrong not in captured.out + captured.err + caplog.text
    # nothing moved: the batch is still planned, the cursor where it was, no output published
    assert ledger.cursors("sasl_wrong") == cursors
    with ledger.transaction() as tx:
        assert tx.planned_batch_id("sasl_wrong") == planned.batch_id
        attempts = tx.fetchall("SELECT state, error FROM {s}.attempts WHERE pipeline = 'sasl_wrong'")
    assert [a[0] for a in attempts] == ["failed"] and "authentication" in attempts[0][1]
    assert wrong not in ledger_text(ledger)
    assert not Path(LocalDirectorySink(str(output)).output_uri("sasl_wrong", planned.batch_id)[7:]).exists()
    assert ledger.committed_batches("sasl_wrong") == []


def test_process_watch_would_see_a_secret_in_argv_or_environment():
    """Control for the sampler: a process holding the secret (here in argv) or one of the other watched
    strings (here in its environment) is caught."""
    secret, other = f"canary-{uuid.uuid4().hex}", f"other-canary-{uuid.uuid4().hex}"
    with ProcessWatch(secret.encode(), marker=b"never-matches-anything", also=(other.encode(),)) as watch:
        argv = subprocess.Popen(["sh", "-c", "sleep 30", secret])
        env = subprocess.Popen(["sleep", "30"], env={**os.environ, "CANARY": other})
        try:
            # Sampled until each kind is seen (a process read in the instant it starts may not show its
            # final command line yet), as the watch samples throughout a batch.
            deadline = time.monotonic() + 20
            while not {"argv", "environment", "ps"} <= {kind for kind, _, _ in watch.leaks}:
                if time.monotonic() > deadline:
                    break
                watch.sample()
                watch.sample_ps()
                time.sleep(0.2)
        finally:
            argv.kill()
            env.kill()
            argv.wait(timeout=60)
            env.wait(timeout=60)
    kinds = {kind for kind, _, _ in watch.leaks}
    assert {"argv", "environment", "ps"} <= kinds, watch.leaks
