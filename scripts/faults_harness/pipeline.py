"""One trial's topic, pipeline, output root and produced records; starts its tasks as worker processes
and observes where their batch is."""

from __future__ import annotations

import json
import random
import threading
import uuid
from typing import Any

import pyarrow.fs as pafs
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, object_storage
from airflow_kafka_offsets.sinks import REPORT_NAME, Sink
from faults_harness.avro_values import AvroValues
from faults_harness.context import MERGE_SINKS, PARTITIONS, Context
from faults_harness.procs import Worker, worker_argv, worker_env
from faults_harness.records import mirror_state, produce_changes, produce_wave
from faults_harness.results import StepLog
from faults_harness.worker import SPARK_CONF_ENV

WORKER_TIMEOUT_S = 600.0


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
        self._lock = threading.Lock()
        # a client of its own, gone with this call: no idle connection logs errors while a trial restarts Kafka
        admin = AdminClient({"bootstrap.servers": ctx.info.bootstrap_servers})
        futures = admin.create_topics([NewTopic(self.topic, num_partitions=PARTITIONS, replication_factor=1)])
        futures[self.topic].result(timeout=60)
        self.avro = AvroValues(ctx.info.schema_registry_client_config(), self.topic) if ctx.avro else None

    # records ---------------------------------------------------------------------

    def produce(self, count: int, tag: str) -> list[dict[str, Any]]:
        servers = self.ctx.info.bootstrap_servers
        if self.ctx.sink in MERGE_SINKS:
            acked = produce_changes(servers, self.topic, count, tag, sorted(mirror_state(self.produced)), self.rng)
        else:
            acked = produce_wave(servers, self.topic, count, tag, self.avro)
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
        """Start one try of a task: ``plan``, ``read``, ``commit`` (of ``batch_id``) or the one-task ``batch``."""
        step_batch = batch_id
        if step == "batch":  # the task decides its batch: the one planned now, if any, else the one it plans
            step_batch, batch_id = None, self.planned_batch()
        argv = worker_argv(
            step,
            self.name,
            self.topic,
            self.output_root,
            self.ctx.schema,
            batch_id=step_batch,
            run_id=run_id,
            try_number=try_number,
            sink=self.ctx.sink_option(self.name),
            value_format=self.avro.value_format if self.avro else None,
            keep_raw_value=self.ctx.keep_raw_value,
            json_schema=self.ctx.json_schema,
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

    def failure_tails(self, n: int = 3) -> str:
        failed = [w for w in self.workers if w.returncode not in (0, None)][-n:]
        return "\n".join(f"--- {w.log} ---\n{w.tail(25)}" for w in failed)

    # observation -----------------------------------------------------------------

    def planned_batch(self) -> int | None:
        """The pipeline's planned batch in the ledger (None: none, or the pipeline is not planned yet)."""
        with self.ctx.ledger().transaction() as tx:
            return tx.planned_batch_id(self.name)

    def batch_of(self, worker: Worker) -> int | None:
        """The batch a worker works on; a one-task worker started before its plan learns it once planned."""
        if worker.batch_id is None and worker.step == "batch":
            worker.batch_id = self.planned_batch()
        return worker.batch_id

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
        mine = [d for d in self.attempt_dirs(self.batch_of(worker)) if d not in worker.existing_attempts]
        if any(self.storage.exists(files.join(d, REPORT_NAME)) for d in mine):
            return "staged"
        if any(self.storage.exists(files.join(d, "_temporary")) for d in mine):
            return "writing"
        return "none"

    def attempt_running(self, worker: Worker) -> bool:
        """The worker's Spark attempt is recorded as running in the ledger (its job was started)."""
        batch_id = self.batch_of(worker)
        with self.ctx.ledger().transaction() as tx:
            attempts = tx.attempts(self.name, [batch_id]) if batch_id is not None else []
        return any(a.state == "running" and a.staging_uri not in worker.existing_attempts for a in attempts)
