"""Trials: produce waves of records with unique ids, run the batch steps as separate worker
processes, inject one fault per trial, recover the way Airflow would, verify exactly-once.

A DAG run here is what ``kafka_ingest_task_group`` is in Airflow: the tasks plan >> read >>
commit, each its own process (:mod:`faults_harness.worker`), each retried up to ``retries``
times. Recovery is either a task retry (``retry``: the faulted task is tried again and the
run goes on) or the next scheduled run (``next_run``: the faulted run has no retries left and
fails; a fresh run starts from plan).
"""

from __future__ import annotations

import json
import random
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import pyarrow.fs as pafs
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import devstack
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, object_storage
from airflow_kafka_offsets.service.faults import CRASH_ENV
from airflow_kafka_offsets.sinks import REPORT_NAME, Sink
from faults_harness.avro_values import AvroValues
from faults_harness.procs import Worker, kill_everything_started, worker_argv, worker_env
from faults_harness.verify import Verdict, verify
from faults_harness.worker import PAUSE_ENV, SPARK_CONF_ENV

PARTITIONS = 3
MODES = ("retry", "next_run")
RETRIES = 2  # as the example DAG's default_args
RETRY_DELAY_S = 1.0
MAX_RUNS = 4  # runs (each with its task retries) before a trial counts as stuck
WORKER_TIMEOUT_S = 600.0
SPARK_START_TIMEOUT_S = 240.0
MISSED = "MISSED: "  # how a monitor says the moment for its fault never came
STORAGES = ("local", "s3")
SINKS = ("directory", "iceberg", "delta", "iceberg-multi", "delta-multi")
ROUTED_TABLES = 4  # the multi-table sinks: records go to one of 4 tables by their header "table"


class TrialError(Exception):
    """The pipeline could not be brought to a committed state: a stuck trial."""


@dataclass
class Context:
    """What every trial shares: the stack, the ledger schema, a work directory."""

    info: devstack.StackInfo
    schema: str
    workdir: Path
    batches: int = 2
    records: tuple[int, int] = (100, 250)
    recovery: str = "mixed"
    storage: str = "local"  # local: a directory of the work dir; s3: the stack's bucket
    sink: str = "directory"  # directory, iceberg or delta
    avro: bool = False  # Avro values of three writer versions and corrupted ones (faults_harness.avro_values)
    # small batches: no Spark UI, few shuffle partitions (the report's groupBy)
    spark_conf: dict[str, str] = field(
        default_factory=lambda: {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "3"}
    )
    env: dict[str, str] = field(default_factory=dict)  # for every worker, e.g. a spark_connect spark_default

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.airflow_home = self.workdir / "airflow-home"
        self.airflow_home.mkdir(exist_ok=True)

    @property
    def on_spark_connect(self) -> bool:
        """The read steps run on a Spark Connect server (the workers' spark_default is one)."""
        return "AIRFLOW_CONN_SPARK_DEFAULT" in self.env

    def ledger(self) -> Ledger:
        dsn = self.info.pg_dsn()
        return Ledger(lambda: psycopg2.connect(dsn), schema=self.schema, catalog_uri=self.info.pg_url())

    def output_root(self, local_dir: Path) -> str:
        if self.storage == "s3":
            if not self.info.s3_bucket:
                raise TrialError("--storage s3 needs the stack's S3 server: run `scripts/stack up`")
            return f"s3://{self.info.s3_bucket}/faults/{self.schema}"  # one root per run: pipelines are unique
        return str(local_dir / "out")

    def sink_option(self, pipeline: str) -> dict[str, Any] | None:
        """The plan step's ``sink``: a table of the trial's own for the table formats."""
        table = pipeline.replace("-", "_")
        if self.sink == "iceberg":
            return {"format": "iceberg", "table": f"faults.{table}"}
        if self.sink == "delta":
            return {"format": "delta", "table": table}
        if self.sink.endswith("-multi"):
            sink_format = self.sink.removesuffix("-multi")
            prefix = f"faults.{table}_" if sink_format == "iceberg" else f"{table}_"
            allow = [f"{prefix}t{i}" for i in range(ROUTED_TABLES)]
            return {"format": sink_format, "route": {"pattern": prefix + "{header:table}", "allow": allow}}
        return None

    def pg(self) -> Any:  # a psycopg2 connection
        return psycopg2.connect(self.info.pg_dsn())


@dataclass
class StepLog:
    run_id: str
    step: str
    try_number: int
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.run_id}/{self.step}#{self.try_number} {'ok' if self.ok else 'FAILED'}: {self.detail}"


@dataclass
class RunOutcome:
    run_id: str
    ok: bool
    batch_id: int | None = None
    committed_now: bool | None = None
    planned_batch: int | None = None
    failed_step: str | None = None


@dataclass
class Fault:
    """One injected fault: which task it hits, the env of that try, what the harness does meanwhile."""

    step: str
    env: dict[str, str] = field(default_factory=dict)
    monitor: Callable[[Pipeline, Worker], str] | None = None
    description: str = ""
    fired: bool = False
    outcome: str = ""
    after: Callable[[], None] | None = None  # once the faulted try has ended (late records, successors...)


@dataclass
class TrialResult:
    kind: str
    index: int
    mode: str
    verdict: Verdict | None
    fault: str
    fired: bool
    steps: list[StepLog]
    error: str | None = None
    seconds: float = 0.0
    directory: Path | None = None

    @property
    def lost(self) -> int:
        return self.verdict.lost if self.verdict else 0

    @property
    def duplicated(self) -> int:
        return self.verdict.duplicated if self.verdict else 0

    @property
    def torn(self) -> int | None:
        return self.verdict.torn if self.verdict else None

    @property
    def ok(self) -> bool:
        return self.error is None and self.verdict is not None and self.verdict.ok


class Pipeline:
    """One trial's topic, pipeline, output root and produced records; runs its steps as workers."""

    def __init__(self, ctx: Context, kind: str, index: int, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng
        suffix = uuid.uuid4().hex[:6]
        self.name = f"{kind}-{index}-{suffix}"
        self.topic = f"faults-{kind}-{index}-{suffix}"
        self.dir = ctx.workdir / self.name
        self.output_root = ctx.output_root(self.dir)
        self.storage = files.Storage(object_storage(self.output_root))
        self._sink: Sink | None = None
        self.produced: list[dict[str, Any]] = []
        self.steps: list[StepLog] = []
        self.workers: list[Worker] = []
        self.orphans: list[int] = []  # process groups of Spark jobs whose worker was killed
        self.current_batch: int | None = None
        self._lock = threading.Lock()
        # a client of its own, gone with this call: no idle connection logs errors while a trial restarts Kafka
        admin = AdminClient({"bootstrap.servers": ctx.info.bootstrap_servers})
        futures = admin.create_topics([NewTopic(self.topic, num_partitions=PARTITIONS, replication_factor=1)])
        futures[self.topic].result(timeout=60)
        self.avro = AvroValues(ctx.info.schema_registry_client_config(), self.topic) if ctx.avro else None

    # records ---------------------------------------------------------------------

    def produce(self, count: int, tag: str) -> list[dict[str, Any]]:
        producer = Producer(
            {"bootstrap.servers": self.ctx.info.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5}
        )
        acked: list[dict[str, Any]] = []
        errors: list[str] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            key = msg.key()
            if err is not None:
                errors.append(str(err))
            elif key is None:  # every record here has a key
                errors.append(f"record without a key acked at offset {msg.offset()}")
            else:
                acked.append({"id": key.decode(), "partition": msg.partition(), "offset": msg.offset()})

        expect: dict[str, dict[str, Any]] = {}  # Avro: each id's decoded fields or decode_error
        # Avro: one corrupted record per partition after the wave's good ones
        total = count + (PARTITIONS if self.avro else 0)
        for i in range(total):
            rid = f"{tag}{uuid.uuid4().hex}"
            value = json.dumps({"id": rid, "n": i}).encode()
            if self.avro is not None:
                made = self.avro.good(rid, i) if i < count else self.avro.corrupted(rid)
                value, expect[rid] = made.value, {"decoded": made.decoded, "error": made.error}
            producer.produce(
                self.topic,
                key=rid.encode(),
                value=value,
                partition=i % PARTITIONS,
                headers=[("table", f"t{i % ROUTED_TABLES}".encode())],
                on_delivery=delivered,
            )
            producer.poll(0)
        if producer.flush(120) or errors or len(acked) != total:
            raise TrialError(f"producing to {self.topic} failed: {len(acked)} of {total} acknowledged {errors[:3]}")
        for record in acked:
            record.update(expect.get(record["id"], {}))
        with self._lock:
            self.produced += acked
        return acked

    def random_wave(self, tag: str) -> list[dict[str, Any]]:
        return self.produce(self.rng.randint(*self.ctx.records), tag)

    # workers ---------------------------------------------------------------------

    def worker(
        self,
        step: str,
        run_id: str,
        try_number: int,
        batch_id: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Worker:
        argv = worker_argv(
            step,
            self.name,
            self.topic,
            self.output_root,
            self.ctx.schema,
            batch_id=batch_id,
            run_id=run_id,
            try_number=try_number,
            sink=self.ctx.sink_option(self.name),
            value_format=self.avro.value_format if self.avro else None,
        )
        env = worker_env(
            self.ctx.info.airflow_env(),
            str(self.ctx.airflow_home),
            {
                "PGAPPNAME": f"faults-worker-{uuid.uuid4().hex[:12]}",  # to find its sessions
                SPARK_CONF_ENV: json.dumps(self.ctx.spark_conf),
                **self.ctx.env,
                **(extra_env or {}),
            },
        )
        worker = Worker(
            step,
            argv,
            env,
            self.dir / "logs" / f"{run_id}-{step}-try{try_number}.log",
            batch_id=batch_id,
            existing_attempts=frozenset(self.attempt_dirs(batch_id)),
        )
        with self._lock:
            self.workers.append(worker)
        return worker.start()

    def finish(self, worker: Worker, run_id: str, try_number: int) -> None:
        try:
            worker.wait(timeout=WORKER_TIMEOUT_S)
        except Exception:  # subprocess.TimeoutExpired
            worker.kill_group()
            worker.error = f"timed out after {WORKER_TIMEOUT_S:.0f}s and was killed"
        detail = json.dumps(worker.result, sort_keys=True) if worker.ok else (worker.error or "failed")
        with self._lock:
            self.steps.append(StepLog(run_id, worker.step, try_number, worker.ok, detail))

    def run(  # noqa: C901 - a DAG run's steps, their tries and faults, in the order they happen
        self, run_id: str, retries: int = RETRIES, faults: list[Fault] | None = None
    ) -> RunOutcome:
        """One DAG run: plan >> read >> commit, each task tried up to ``retries + 1`` times.

        Each fault hits the first try of its step not hit yet (a chain of faults on one step
        hits successive tries).
        """
        outcome = RunOutcome(run_id, ok=False)
        batch_id = None
        for step in ("plan", "read", "commit"):
            worker = None
            for try_number in range(1, retries + 2):
                inject = next((f for f in faults or () if f.step == step and not f.fired), None)
                worker = self.worker(step, run_id, try_number, batch_id, inject.env if inject else None)
                if inject is not None:
                    inject.fired = True
                    inject.outcome = inject.monitor(self, worker) if inject.monitor else "crash point reached"
                self.finish(worker, run_id, try_number)
                if inject is not None:
                    if inject.env.get(CRASH_ENV) and worker.returncode != -9:
                        inject.outcome = f"{MISSED}crash point {inject.env[CRASH_ENV]} not reached"
                    if inject.after:
                        inject.after()
                if worker.ok:
                    break
                if try_number <= retries:
                    time.sleep(RETRY_DELAY_S)
            assert worker is not None
            if not worker.ok:
                outcome.failed_step = step
                return outcome
            if step == "plan":
                batch_id = worker.answer()["batch_id"]
                outcome.planned_batch = batch_id
                if batch_id is None:  # read and commit find nothing to do
                    outcome.ok = True
                    return outcome
            if step == "commit":
                outcome.committed_now = worker.answer()["committed_now"]
        outcome.ok = True
        outcome.batch_id = batch_id
        return outcome

    def run_until_success(self, run_prefix: str, first_run: int = 1, faults: list[Fault] | None = None) -> RunOutcome:
        """Scheduled runs until one succeeds (each with task retries); stuck after MAX_RUNS.

        Faults of a chain not injected yet hit the next runs.
        """
        for n in range(first_run, MAX_RUNS + 1):
            outcome = self.run(f"{run_prefix}-run{n}", faults=faults)
            if outcome.ok:
                return outcome
        raise TrialError(f"no run of {self.name} succeeded in {MAX_RUNS} runs; last failures:\n" + self.failure_tails())

    def failure_tails(self, n: int = 3) -> str:
        failed = [w for w in self.workers if w.returncode not in (0, None)][-n:]
        return "\n".join(f"--- {w.log} ---\n{w.tail(25)}" for w in failed)

    # observation -----------------------------------------------------------------

    def sink(self) -> Sink:
        """The pipeline's sink, once the plan step has put the pipeline in the ledger."""
        if self._sink is None:
            self._sink = AIRFLOW_SINKS.for_pipeline(self.ctx.ledger(), self.name)
        return self._sink

    def attempt_dirs(self, batch_id: int | None) -> list[str]:
        """Where the batch's Spark attempts write (URIs): the sink's staging layout, on disk or S3."""
        if batch_id is None:
            return []
        batch_dir = self.sink().staging_uri(self.name, batch_id, "-").rsplit("/", 1)[0]
        fs, path = self.storage.filesystem(batch_dir)
        listed = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return [files.join(batch_dir, i.base_name) for i in listed if i.type == pafs.FileType.Directory]

    def spark_phase(self, worker: Worker) -> str:
        """Where the worker's Spark attempt is: 'none' (nothing written yet), 'writing' (files under
        Spark's _temporary; on S3 they show once a task closes its first file), 'staged' (the report
        is written)."""
        mine = [d for d in self.attempt_dirs(worker.batch_id) if d not in worker.existing_attempts]
        if any(self.storage.exists(files.join(d, REPORT_NAME)) for d in mine):
            return "staged"
        if any(self.storage.exists(files.join(d, "_temporary")) for d in mine):
            return "writing"
        return "none"

    def attempt_running(self, worker: Worker) -> bool:
        """The worker's Spark attempt is recorded as running in the ledger (its job was started)."""
        with self.ctx.ledger().transaction() as tx:
            attempts = tx.attempts(self.name, [worker.batch_id]) if worker.batch_id is not None else []
        return any(a.state == "running" and a.staging_uri not in worker.existing_attempts for a in attempts)


# ---------------------------------------------------------------------------------
# observation helpers for monitors


def wait_until(cond: Callable[[], bool], worker: Worker, timeout: float, poll: float = 0.05) -> bool:
    """Poll ``cond`` while the worker lives; False if it exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        if not worker.alive():
            return cond()
        time.sleep(poll)
    return False


def wait_spark_app(worker: Worker) -> bool:
    return wait_until(worker.spark_app_running, worker, SPARK_START_TIMEOUT_S, poll=0.1)


def kill_in_spark(pipe: Pipeline, worker: Worker, *, target: str, whole_group: bool) -> str:
    """SIGKILL during the Spark job: ``target`` 'read' (a random moment before the Parquet write
    starts) or 'write' (as soon as Spark's _temporary directory appears)."""
    if not wait_spark_app(worker):
        return f"{MISSED}Spark never ran (worker ended {worker.poll()})"
    started = time.monotonic()
    if target == "read":
        delay = pipe.rng.uniform(0.0, 4.0)
        wait_until(lambda: time.monotonic() - started >= delay or pipe.spark_phase(worker) != "none", worker, 60)
    else:
        wait_until(lambda: pipe.spark_phase(worker) != "none", worker, 180, poll=0.02)
    phase = pipe.spark_phase(worker)
    at = time.monotonic() - started
    if not worker.alive():
        return f"{MISSED}worker ended before the kill (phase {phase})"
    if whole_group:
        worker.kill_group()
        what = "worker + spark-submit/JVM/driver (process group)"
    else:
        worker.kill_worker_only()
        what = "worker only, Spark left running as an orphan"
        pipe.orphans.append(worker.pid)
    moment = {
        "none": "before the Parquet write started",
        "writing": "while Parquet was being written",
        "staged": "after Spark staged its output",
    }[phase]
    return f"SIGKILL {what} {at:.1f}s into the Spark app, {moment}"


def restart(service: str, **kwargs: Any) -> str:
    """Restart a stack service; if its port was taken meanwhile (the stack's ports are in the
    ephemeral range: any process binding port 0 can get one while the service is down), start it
    again on the same port as soon as the port is free. Returns a note on such a delay."""
    restarts: dict[str, Callable[..., None]] = {
        "kafka": devstack.restart_kafka,
        "postgres": devstack.restart_postgres,
        "s3": devstack.restart_s3,
    }
    what = restarts[service]
    try:
        what(**kwargs)
        return ""
    except devstack.StackError as exc:
        first = str(exc).splitlines()[0]
    deadline = time.monotonic() + 180
    began = time.monotonic()
    while True:
        time.sleep(2)
        try:
            devstack.up()
            return f" (restart delayed {time.monotonic() - began:.0f}s: {first})"
        except devstack.StackError:
            if time.monotonic() > deadline:
                raise


def wait_paused(worker: Worker, timeout: float = 240.0) -> bool:
    return wait_until(worker.stopped, worker, timeout, poll=0.05)


def restart_at_pause(point: str, what: str, service: str, **how: object) -> Callable[[Pipeline, Worker], str]:
    """A monitor: once the worker stopped itself at ``point``, restart ``service``, then let it go on."""

    def monitor(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}commit never reached {point}"
        try:
            note = restart(service, **how)
        finally:
            w.resume()
        return f"{what} at {point}{note}"

    return monitor


def terminate_backends(ctx: Context, appname: str) -> int:
    with ctx.pg() as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (appname,))
        n = len(cur.fetchall())
    conn.close()
    return n


# ---------------------------------------------------------------------------------
# fault kinds: each returns the Fault for the wave's first run (and may run more itself)


def crash(step: str, point: str) -> Callable[[Pipeline], Fault]:
    def make(pipe: Pipeline) -> Fault:
        return Fault(step, {CRASH_ENV: point}, description=f"SIGKILL at crash point {point}")

    return make


def spark_kill(target: str, whole_group: bool) -> Callable[[Pipeline], Fault]:
    def make(pipe: Pipeline) -> Fault:
        return Fault(
            "read",
            monitor=lambda p, w: kill_in_spark(p, w, target=target, whole_group=whole_group),
            description=f"SIGKILL during the Spark {target}",
        )

    return make


def postgres_restart(pipe: Pipeline) -> Fault:
    mode = pipe.rng.choice(["immediate", "fast"])
    if pipe.rng.random() < 0.5:

        def during_spark(p: Pipeline, w: Worker) -> str:
            if not wait_spark_app(w):
                return f"{MISSED}Spark never ran"
            time.sleep(p.rng.uniform(0.0, 3.0))
            phase = p.spark_phase(w)
            note = restart("postgres", mode=mode)
            return f"PostgreSQL restarted ({mode}) while the Spark job ran (phase {phase}){note}"

        return Fault("read", monitor=during_spark, description=f"PostgreSQL restart ({mode}) during Spark")
    point = pipe.rng.choice(["after_publish", "in_commit_transaction"])
    return Fault(
        "commit",
        {PAUSE_ENV: point},
        monitor=restart_at_pause(
            point, f"PostgreSQL restarted ({mode}) with the commit transaction open", "postgres", mode=mode
        ),
        description=f"PostgreSQL restart ({mode}) inside the commit at {point}",
    )


def kafka_restart(pipe: Pipeline) -> Fault:
    """The broker restarts while Spark starts up (metadata, offsets) or as its tasks fetch records."""
    hard = pipe.rng.random() < 0.5
    at_write = pipe.rng.random() < 0.5
    how = "SIGKILL" if hard else "clean"

    def during_spark(p: Pipeline, w: Worker) -> str:
        if not wait_spark_app(w):
            return f"{MISSED}Spark never ran"
        if at_write:  # tasks fetch from Kafka and write Parquet once _temporary exists
            wait_until(lambda: p.spark_phase(w) != "none", w, 180, poll=0.02)
        else:
            time.sleep(p.rng.uniform(0.0, 4.0))
        phase = p.spark_phase(w)
        if phase == "staged" or not w.alive():
            return f"{MISSED}the Spark job ended before the restart"
        note = restart("kafka", hard=hard)
        moment = "as its tasks fetched records" if phase == "writing" else "while it started"
        return f"Kafka broker restarted ({how}) during the Spark job, {moment}{note}"

    return Fault(
        "read",
        monitor=during_spark,
        description=f"Kafka restart ({how}) {'as Spark fetches' if at_write else 'as Spark starts'}",
    )


def s3_restart(pipe: Pipeline) -> list[Fault]:
    """The S3 server SIGKILLed and restarted on its data twice in one batch: while the Spark job
    runs (reading Kafka, writing its attempt), then with the commit stopped after the output was
    published (a manifest, a table commit) or inside the ledger's transaction."""
    point = pipe.rng.choice(["after_publish", "in_commit_transaction"])
    connect = pipe.ctx.on_spark_connect  # no process to watch, and a job of seconds
    delay = pipe.rng.uniform(0.1, 1.0) if connect else pipe.rng.uniform(0.5, 3.0)

    def during_spark(p: Pipeline, w: Worker) -> str:
        started = (lambda: p.attempt_running(w)) if connect else w.spark_app_running
        if not wait_until(started, w, SPARK_START_TIMEOUT_S, poll=0.2):
            return f"{MISSED}Spark never ran (worker ended {w.poll()})"
        time.sleep(delay)
        phase = p.spark_phase(w)
        if phase == "staged" or not w.alive():
            return f"{MISSED}the Spark job ended before the S3 server could be killed"
        note = restart("s3", hard=True)
        return f"S3 server SIGKILLed and restarted {delay:.1f}s into the Spark job (phase {phase}){note}"

    in_commit = restart_at_pause(point, "S3 server SIGKILLed and restarted with the commit stopped", "s3", hard=True)
    return [
        Fault("read", monitor=during_spark, description="S3 server SIGKILL + restart during Spark"),
        Fault("commit", {PAUSE_ENV: point}, monitor=in_commit, description=f"S3 server SIGKILL + restart at {point}"),
    ]


def stale_worker(pipe: Pipeline) -> Fault:
    """A worker presumed dead (paused) while a successor takes over, then it wakes up."""
    if pipe.rng.random() < 0.5:
        # A stops inside the commit transaction after publishing; its session is ended (the
        # database's idle-in-transaction timeout, or an operator killing a zombie's session),
        # the successor (the task's retry) commits; A wakes up and must not commit.
        def commit_fenced(p: Pipeline, w: Worker) -> str:
            if not wait_paused(w):
                return f"{MISSED}commit never reached after_publish"
            appname = w.env["PGAPPNAME"]
            ended = terminate_backends(p.ctx, appname)
            successor = p.worker("commit", "successor", 1, p.current_batch)
            p.finish(successor, "successor", 1)
            w.resume()
            return (
                f"committer paused after publishing, its session ended ({ended}); successor commit "
                f"{'ok ' + json.dumps(successor.result) if successor.ok else 'FAILED: ' + str(successor.error)}; "
                "the stale committer resumed"
            )

        fault = Fault(
            "commit",
            {PAUSE_ENV: "after_publish"},
            monitor=commit_fenced,
            description="stale committer resumes after a successor committed",
        )

        def check() -> None:
            stale = [w for w in pipe.workers if w.env.get(PAUSE_ENV) == "after_publish"][-1]
            if stale.ok:
                raise TrialError(f"the stale committer was not fenced: it returned {stale.result}")
            fault.outcome += f"; it failed: {stale.error}"

        fault.after = check
        return fault

    # A stops after its Spark attempt succeeded; the successor (the task's retry) reads
    # again and commits; A wakes up and its run goes on to commit with its old attempt.
    def reader_stale(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}read never reached after_spark"
        successor = p.run("successor")
        w.resume()
        w.wait(timeout=WORKER_TIMEOUT_S)
        late = p.worker("commit", "stale", 1, p.current_batch)
        p.finish(late, "stale", 1)
        if not late.ok or late.answer().get("committed_now"):
            raise TrialError(
                f"the stale run's commit should report the batch already committed: {late.result or late.error}"
            )
        return (
            f"reader paused after Spark; successor run {'ok' if successor.ok else 'FAILED'} "
            f"(committed_now={successor.committed_now}); stale run resumed and its commit reported "
            "the batch already committed"
        )

    return Fault(
        "read",
        {PAUSE_ENV: "after_spark"},
        monitor=reader_stale,
        description="stale reader resumes after a successor committed",
    )


KINDS: dict[str, Callable[[Pipeline], Fault | list[Fault]] | None] = {
    "after_plan": crash("plan", "after_plan"),
    "during_spark_read": spark_kill("read", whole_group=True),
    "during_parquet_write": spark_kill("write", whole_group=True),
    "spark_orphaned": spark_kill("write", whole_group=False),
    "after_spark": crash("read", "after_spark"),
    "after_publish": crash("commit", "after_publish"),
    "in_commit_transaction": crash("commit", "in_commit_transaction"),
    "after_commit": crash("commit", "after_commit"),
    "postgres_restart": postgres_restart,
    "kafka_restart": kafka_restart,
    "s3_restart": s3_restart,
    "stale_worker": stale_worker,
    "concurrent_runs": None,  # two runs started together, no other fault
}


# ---------------------------------------------------------------------------------


def concurrent_runs(pipe: Pipeline, prefix: str) -> str:
    """A scheduled run and a manual one started at the same moment on the same pipeline."""
    outcomes: dict[str, RunOutcome | BaseException] = {}
    barrier = threading.Barrier(2)

    def go(name: str) -> None:
        barrier.wait()
        try:
            outcomes[name] = pipe.run_until_success(f"{prefix}-{name}")
        except BaseException as exc:  # reported below
            outcomes[name] = exc

    threads = [threading.Thread(target=go, args=(n,)) for n in ("scheduled", "manual")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = {n: o for n, o in outcomes.items() if isinstance(o, BaseException)}
    if failed:
        raise TrialError("; ".join(f"{n}: {o}" for n, o in failed.items()))
    done = {n: o for n, o in outcomes.items() if isinstance(o, RunOutcome)}  # all of them
    ledger = pipe.ctx.ledger()
    with ledger.transaction() as tx:
        events = tx.fetchall(
            "SELECT batch_id, event, count(*) FROM {s}.audit WHERE pipeline = %s"
            " AND event IN ('planned', 'committed') GROUP BY batch_id, event",
            (pipe.name,),
        )
    twice = [f"batch {b} {e} {n} times" for b, e, n in events if n != 1]
    if twice:
        raise TrialError("concurrent runs: " + ", ".join(twice))
    summary = ", ".join(
        f"{n}: planned {o.planned_batch} committed_now={o.committed_now}" for n, o in sorted(done.items())
    )
    return f"two runs started together ({summary})"


def choose_mode(ctx: Context, kind_index: int, trial: int, rng: random.Random) -> str:
    if ctx.recovery in MODES:
        return ctx.recovery
    return MODES[(kind_index + trial) % 2]


CHAINABLE = (
    "after_plan",
    "during_spark_read",
    "during_parquet_write",
    "after_spark",
    "after_publish",
    "in_commit_transaction",
    "after_commit",
)


def kinds_of(kind: str) -> list[str]:
    """A trial's kind is one fault kind, or a chain 'k1+k2+...' of CHAINABLE kinds injected into
    successive tries of one batch (one Spark run serves several faults: what CI uses)."""
    return kind.split("+")


def run_trial(ctx: Context, kind: str, index: int, seed: int) -> TrialResult:  # noqa: C901 - one trial, in order
    rng = random.Random(f"{seed}:{kind}:{index}")
    parts = kinds_of(kind)
    chained = len(parts) > 1
    if chained or kind in ("concurrent_runs", "stale_worker"):
        mode = "retry" if chained else "n/a"
    else:
        mode = choose_mode(ctx, list(KINDS).index(kind), index, rng)
    started = time.monotonic()
    pipe: Pipeline | None = None
    faults: list[Fault] = []
    description = ""
    try:
        pipe = Pipeline(ctx, f"chain{len(parts)}" if chained else kind, index, rng)
        fault_wave = rng.randrange(max(1, ctx.batches - 1))
        for wave in range(ctx.batches):
            pipe.random_wave(f"w{wave}-")
            prefix = f"w{wave}"
            if wave != fault_wave:
                pipe.run_until_success(prefix)
                continue
            if kind == "concurrent_runs":
                description = concurrent_runs(pipe, prefix)
                continue
            faults = [f for k in parts for f in faults_of(KINDS[k], pipe)]
            if kind == "stale_worker":
                _with_batch(pipe, faults[0])
            if wave < ctx.batches - 1:
                previous = faults[0].after

                def produce_late(prev: Callable[[], None] | None = previous, tag: str = f"w{wave}late-") -> None:
                    if prev:
                        prev()
                    pipe.random_wave(tag)  # newer records the replay must leave to the next batch

                faults[0].after = produce_late
            first = pipe.run(f"{prefix}-run1", retries=0 if mode == "next_run" else RETRIES, faults=faults)
            if not first.ok:
                pipe.run_until_success(prefix, first_run=2, faults=faults)
            description = "; then ".join(f"{f.description}: {f.outcome}" for f in faults)
        _reap_orphans(pipe)
        verdict = verify(ctx.ledger(), pipe.name, pipe.output_root, pipe.produced)
        error = None
    except Exception as exc:  # TrialError: stuck; anything else: a harness or stack problem
        verdict = None
        error = str(exc) if isinstance(exc, TrialError) else "".join(traceback.format_exception(exc)).rstrip()
        kill_everything_started()
        try:
            devstack.up()  # a restart may have left a service down
        except devstack.StackError as up_exc:
            error += f"\n(the stack is not up: {up_exc})"
        if pipe is not None:
            _reap_orphans(pipe)
            try:
                verdict = verify(ctx.ledger(), pipe.name, pipe.output_root, pipe.produced)
            except Exception as vexc:  # report the trial's own error first
                error += f"\n(verification failed too: {vexc})"
    fired = kind == "concurrent_runs" or (
        bool(faults) and all(f.fired and not f.outcome.startswith(MISSED) for f in faults)
    )
    return TrialResult(
        kind,
        index,
        mode,
        verdict,
        description or "; ".join(f.description for f in faults),
        fired,
        pipe.steps if pipe else [],
        error,
        time.monotonic() - started,
        pipe.dir if pipe else None,
    )


def faults_of(make: Callable[[Pipeline], Fault | list[Fault]] | None, pipe: Pipeline) -> list[Fault]:
    """A kind's faults for one batch (most kinds have one; s3_restart hits the read and the commit)."""
    assert make is not None, "concurrent_runs has no fault of its own"
    made = make(pipe)
    return made if isinstance(made, list) else [made]


def _with_batch(pipe: Pipeline, fault: Fault) -> None:
    """Stale-worker monitors need the batch id of the run they disturb."""
    monitor = fault.monitor
    assert monitor is not None, "a stale-worker fault has a monitor"

    def wrapped(p: Pipeline, w: Worker) -> str:
        with p.ctx.ledger().transaction() as tx:
            p.current_batch = tx.planned_batch_id(p.name)
        return monitor(p, w)

    fault.monitor = wrapped


def _reap_orphans(pipe: Pipeline, timeout: float = 120.0) -> None:
    """Let orphaned Spark jobs finish (they must not matter), then make sure they are gone."""
    from faults_harness.procs import group_members, kill_leftovers

    for pgid in pipe.orphans:
        deadline = time.monotonic() + timeout
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        kill_leftovers(pgid)


def summarize(results: list[TrialResult], kinds: list[str]) -> tuple[list[str], bool]:
    lines, ok = [], True
    for kind in dict.fromkeys(k for chain in kinds for k in kinds_of(chain)):
        mine = [r for r in results if kind in kinds_of(r.kind)]
        lost = sum(r.lost for r in mine)
        dup = sum(r.duplicated for r in mine)
        failed = sum(1 for r in mine if not r.ok)
        fired = sum(1 for r in mine if r.fired)
        torn = [r.torn for r in mine if r.torn is not None]
        ok = ok and not lost and not dup and not failed and not sum(torn)
        lines.append(
            f"{kind}: trials {len(mine)}, lost {lost}, duplicated {dup}"
            + (f", torn batches {sum(torn)}" if torn else "")
            + f" (failed {failed}, faults fired {fired}/{len(mine)})"
        )
    return lines, ok


def describe(result: TrialResult) -> str:
    head = (
        f"[{result.kind} #{result.index + 1}] {'ok' if result.ok else 'FAILED'} in {result.seconds:.0f}s, "
        f"recovery {result.mode}: {result.fault}"
    )
    body = []
    if result.verdict:
        body.append(f"  verify: {result.verdict.summary()}")
        body += [f"  problem: {p}" for p in result.verdict.problems]
        body += [f"  note: {n}" for n in result.verdict.notes]
    if result.error:
        body += [f"  error: {line}" for line in result.error.splitlines()]
    failed_steps = [s for s in result.steps if not s.ok]
    body += [f"  failed try: {s}" for s in failed_steps]
    return "\n".join([head, *body])
