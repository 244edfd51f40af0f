"""The four ways of getting a topic into Parquet, each timed end to end (process start to exit).

- ``package``: this package's batch, plan + spark-submit (Spark read and write, report) + commit,
  driven like tests/integration/pipeline.py drives the three steps;
- ``structured_streaming``: Spark Structured Streaming, Trigger.AvailableNow, checkpoint, Parquet;
- ``python_consumer``: confluent-kafka consumer + pyarrow Parquet writer in one Python process;
- ``kafka_consumer_perf``: Kafka's ConsumerPerformance tool (reads only, writes nothing): the ceiling.

Spark runs (package and streaming) write an event log, from which the wall clock is split into
spark-submit start-up, Spark set-up, Spark jobs and shutdown.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from airflow_kafka_offsets.core.actor import Actor
from benchmarks.common import CONNECT_CONN_ID, REPO, parquet_rows, run
from benchmarks.event_log import event_log_conf, parse_event_log

ACTOR = Actor(dag_id="benchmarks", run_id="bench")
STREAMING_APP = Path(__file__).with_name("streaming_app.py")
TRIVIAL_APP = Path(__file__).with_name("trivial_app.py")

# A contender: (topic, records expected) -> its figures.
Runner = Callable[[str, int], dict[str, Any]]


def children_cpu() -> float:
    """CPU seconds (user + system) of finished child processes: spark-submit's JVMs and Python, the consumer."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- this package


class PackageRunner:
    """plan -> run -> commit of one batch covering everything in the topic, on a fresh pipeline."""

    def __init__(
        self,
        info: Any,
        ledger: Any,
        workdir: Path,
        spark_conf: Mapping[str, str] | None = None,
        min_partitions: int | None = None,
        app: str | None = None,
        default_conf: Mapping[str, str] | None = None,
        connect_server_pid: int | None = None,
        class_archive_dir: str | None = None,
    ) -> None:
        """``app`` and ``default_conf`` replace SparkSettings.application and default_conf (for a baseline);
        ``connect_server_pid``: run on the stack's warm Spark Connect server (that process's CPU counts);
        ``class_archive_dir``: SparkSettings.class_archive_dir (the driver JVM's class archive)."""
        self.info = info
        self.ledger = ledger
        self.workdir = workdir
        self.spark_conf = dict(spark_conf or {})
        self.min_partitions = min_partitions
        self.app = app
        self.default_conf = dict(default_conf) if default_conf is not None else None
        self.connect_server_pid = connect_server_pid
        self.class_archive_dir = class_archive_dir

    def __call__(self, topic: str, expected: int) -> dict[str, Any]:
        return self._run(topic, expected)

    def _run(self, topic: str, expected: int) -> dict[str, Any]:
        from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
        from airflow_kafka_offsets.core.spec import build_spec
        from airflow_kafka_offsets.runtime import settings_runner
        from airflow_kafka_offsets.service.commit import commit_batch
        from airflow_kafka_offsets.service.plan import plan_batch
        from airflow_kafka_offsets.service.read import run_batch
        from airflow_kafka_offsets.sinks import LocalDirectorySink
        from airflow_kafka_offsets.spark.settings import SparkSettings

        run_dir = self.workdir / f"package-{uuid.uuid4().hex[:8]}"
        events = run_dir / "eventlog"
        pipeline = f"bench-{uuid.uuid4().hex[:8]}"
        spec = build_spec(pipeline, [topic], str(run_dir / "out"))
        sink = LocalDirectorySink(spec.output_root)
        kafka_props = {"bootstrap.servers": self.info.bootstrap_servers}
        replaced: dict[str, Any] = {"application": self.app} if self.app else {}
        if self.default_conf is not None:
            replaced["default_conf"] = self.default_conf
        on_connect = self.connect_server_pid is not None
        settings = SparkSettings(
            conn_id=CONNECT_CONN_ID if on_connect else "spark_default",
            jars=tuple(self.info.connector_jars),
            conf=self.spark_conf if on_connect else {**self.spark_conf, **event_log_conf(events)},
            class_archive_dir=self.class_archive_dir,
            **replaced,
        )
        spark = settings_runner(settings)
        marks: dict[str, float] = {}

        def submit(job: dict[str, Any]) -> None:
            marks["submit_start"] = time.time()
            try:
                spark(job)
            finally:
                marks["submit_end"] = time.time()

        cpu0 = self._cpu()
        t0 = time.time()
        kafka = KafkaOffsetsClient(kafka_props)
        outcome = plan_batch(self.ledger, spec, kafka.offsets, sink, ACTOR)
        t1 = time.time()
        if outcome.plan is None:
            raise RuntimeError(f"nothing to plan in {topic}")
        run_batch(self.ledger, sink, outcome.plan, submit, kafka_props, ACTOR, min_partitions=self.min_partitions)
        t2 = time.time()
        committed = commit_batch(self.ledger, sink, spec.name, outcome.plan.batch_id, ACTOR)
        t3 = time.time()
        cpu = self._cpu() - cpu0  # before the output is counted below
        rows, files, size = parquet_rows(run_dir / "out")
        if committed.records != expected or rows != expected:
            raise RuntimeError(f"package: committed {committed.records}, Parquet holds {rows}, expected {expected}")
        split = {} if on_connect else parse_event_log(events, marks["submit_start"], marks["submit_end"])
        result = {
            "seconds": round(t3 - t0, 3),
            "cpu_s": round(cpu, 1),
            "records": rows,
            "output_files": files,
            "output_bytes": size,
            "phases": {
                "plan_s": round(t1 - t0, 3),
                "attempt_bookkeeping_s": round((t2 - t1) - (marks["submit_end"] - marks["submit_start"]), 3),
                "spark_submit_s": round(marks["submit_end"] - marks["submit_start"], 3),
                "commit_s": round(t3 - t2, 3),
            },
            "spark": split,
            # the worker's own steps as epoch seconds, to lay beside the event log's (profile_setup.py)
            "epochs": {"start": t0, "planned": t1, **marks, "ran": t2, "committed": t3},
        }
        shutil.rmtree(run_dir, ignore_errors=True)
        return result

    def _cpu(self) -> float:
        """spark-submit: its finished processes; Spark Connect: the server's process and this one (the client)."""
        if self.connect_server_pid is None:
            return children_cpu()
        return process_cpu(self.connect_server_pid) + _self_cpu()


# --------------------------------------------------------------------------- Structured Streaming


def spark_submit_argv(info: Any, conf: Mapping[str, str], app: Path, args: list[str], name: str) -> list[str]:
    argv = ["spark-submit", "--master", "local[2]", "--name", name, "--jars", ",".join(info.connector_jars)]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(app), *args]


class StreamingRunner:
    def __init__(self, info: Any, workdir: Path, spark_conf: Mapping[str, str]) -> None:
        self.info = info
        self.workdir = workdir
        self.spark_conf = dict(spark_conf)

    def __call__(self, topic: str, expected: int) -> dict[str, Any]:
        run_dir = self.workdir / f"streaming-{uuid.uuid4().hex[:8]}"
        events = run_dir / "eventlog"
        conf = {**self.spark_conf, **event_log_conf(events)}
        argv = spark_submit_argv(
            self.info,
            conf,
            STREAMING_APP,
            [
                "--bootstrap",
                self.info.bootstrap_servers,
                "--topic",
                topic,
                "--output",
                str(run_dir / "out"),
                "--checkpoint",
                str(run_dir / "checkpoint"),
            ],
            "bench-structured-streaming",
        )
        cpu0 = children_cpu()
        start = time.time()
        run(argv, timeout=3600)
        end = time.time()
        cpu = children_cpu() - cpu0
        rows, files, size = parquet_rows(run_dir / "out")
        if rows != expected:
            raise RuntimeError(f"structured streaming wrote {rows} rows, expected {expected}")
        result = {
            "seconds": round(end - start, 3),
            "cpu_s": round(cpu, 1),
            "records": rows,
            "output_files": files,
            "output_bytes": size,
            "spark": parse_event_log(events, start, end),
        }
        shutil.rmtree(run_dir, ignore_errors=True)
        return result


class StreamingConnectRunner:
    """The same AvailableNow query on the warm Spark Connect server the package's Connect contender
    uses, with the same session settings: the package's same-mode contender (no JVM start either)."""

    def __init__(self, info: Any, workdir: Path, spark_conf: Mapping[str, str], connect_server_pid: int | None) -> None:
        self.info = info
        self.workdir = workdir
        self.spark_conf = dict(spark_conf)
        self.connect_server_pid = connect_server_pid

    def __call__(self, topic: str, expected: int) -> dict[str, Any]:
        from airflow_kafka_offsets.hooks.spark import spark_connection
        from airflow_kafka_offsets.spark.connect import connect_mode, remote_session, session_conf
        from airflow_kafka_offsets.spark.settings import SparkSettings
        from benchmarks.streaming_app import run_available_now

        if self.connect_server_pid is None:
            raise RuntimeError("structured_streaming_connect needs the stack's Spark Connect server")
        run_dir = self.workdir / f"streaming-connect-{uuid.uuid4().hex[:8]}"
        url = spark_connection(CONNECT_CONN_ID).connect_url()
        cpu0 = process_cpu(self.connect_server_pid) + _self_cpu()
        start = time.time()
        with connect_mode():
            spark = remote_session(url)
            try:
                for key, value in session_conf(SparkSettings(conf=self.spark_conf)).items():
                    spark.conf.set(key, value)
                read = run_available_now(
                    spark, self.info.bootstrap_servers, topic, str(run_dir / "out"), str(run_dir / "checkpoint")
                )
            finally:
                spark.stop()
        end = time.time()
        cpu = process_cpu(self.connect_server_pid) + _self_cpu() - cpu0
        rows, files, size = parquet_rows(run_dir / "out")
        if rows != expected:
            raise RuntimeError(f"structured streaming on Connect wrote {rows} rows ({read} read), expected {expected}")
        shutil.rmtree(run_dir, ignore_errors=True)
        return {
            "seconds": round(end - start, 3),
            "cpu_s": round(cpu, 1),
            "records": rows,
            "output_files": files,
            "output_bytes": size,
        }


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class TrivialSubmitRunner:
    """``spark.range(10).count()`` through spark-submit with the package's jars and settings: the floor."""

    def __init__(self, info: Any, workdir: Path, spark_conf: Mapping[str, str], app: Path = TRIVIAL_APP) -> None:
        """``app`` replaces trivial_app.py (profile_setup.py's timed wrapper of it)."""
        self.info = info
        self.workdir = workdir
        self.spark_conf = dict(spark_conf)
        self.app = app

    def __call__(self, topic: str, expected: int) -> dict[str, Any]:
        run_dir = self.workdir / f"trivial-{uuid.uuid4().hex[:8]}"
        events = run_dir / "eventlog"
        argv = spark_submit_argv(
            self.info, {**self.spark_conf, **event_log_conf(events)}, self.app, [], "bench-trivial-submit"
        )
        cpu0 = children_cpu()
        start = time.time()
        run(argv, timeout=600)
        end = time.time()
        result = {
            "seconds": round(end - start, 3),
            "cpu_s": round(children_cpu() - cpu0, 1),
            "spark": parse_event_log(events, start, end),
            "epochs": {"start": start, "submit_start": start, "submit_end": end},
        }
        shutil.rmtree(run_dir, ignore_errors=True)
        return result


# --------------------------------------------------------------------------- plain Python consumer


class PythonConsumerRunner:
    def __init__(self, info: Any, workdir: Path) -> None:
        self.info = info
        self.workdir = workdir

    def __call__(self, topic: str, expected: int) -> dict[str, Any]:
        run_dir = self.workdir / f"python-{uuid.uuid4().hex[:8]}"
        argv = [
            sys.executable,
            "-m",
            "benchmarks.python_consumer",
            "--bootstrap",
            self.info.bootstrap_servers,
            "--topic",
            topic,
            "--output",
            str(run_dir / "out"),
        ]
        cpu0 = children_cpu()
        start = time.time()
        out = run(argv, timeout=3600, cwd=str(REPO))
        end = time.time()
        cpu = children_cpu() - cpu0
        reported = json.loads(out.stdout.strip().splitlines()[-1])
        rows, files, size = parquet_rows(run_dir / "out")
        if rows != expected or reported["records"] != expected:
            raise RuntimeError(f"python consumer wrote {rows} rows, expected {expected}")
        shutil.rmtree(run_dir, ignore_errors=True)
        return {
            "seconds": round(end - start, 3),
            "cpu_s": round(cpu, 1),
            "records": rows,
            "output_files": files,
            "output_bytes": size,
        }


# --------------------------------------------------------------------------- Kafka's own tool


class ConsumerPerfRunner:
    def __init__(self, info: Any) -> None:
        self.info = info

    def __call__(self, topic: str, expected: int) -> dict[str, Any]:
        argv = [
            "java",
            "-cp",
            f"{self.info.kafka_libs_dir}/*",
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server",
            self.info.bootstrap_servers,
            "--topic",
            topic,
            "--messages",
            str(expected),
            "--timeout",
            "60000",
            "--group",
            f"bench-perf-{uuid.uuid4().hex[:8]}",
        ]
        cpu0 = children_cpu()
        start = time.time()
        out = run(argv, timeout=3600)
        end = time.time()
        cpu = children_cpu() - cpu0
        lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
        header = [h.strip() for h in lines[-2].split(",")]
        values = [v.strip() for v in lines[-1].split(",")]
        stats = dict(zip(header, values))
        consumed = int(stats.get("data.consumed.in.nMsg", "0"))
        if consumed < expected:
            raise RuntimeError(f"ConsumerPerformance consumed {consumed}, expected {expected}: {out.stdout[-2000:]}")
        tool = {k: _number(v) for k, v in stats.items() if not k.endswith(".time")}
        return {"seconds": round(end - start, 3), "cpu_s": round(cpu, 1), "records": consumed, "tool_reported": tool}


def _number(value: str) -> Any:
    try:
        return float(value) if re.search(r"[.eE]", value) else int(value)
    except ValueError:
        return value
