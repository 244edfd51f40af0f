"""A worker killed mid-Spark leaves the job file (it holds the Kafka credentials) only in its private directory.

Spark copies ``--files`` into its local directories (``spark-*/userFiles-*``, under ``/tmp`` by
default); those of the local processes are kept inside the job's private 0700 directory. The
worker (a process group: Python, spark-submit's JVM and the PySpark driver) is killed with
SIGKILL once Spark has made its copy, so no clean-up code runs. One spark-submit.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from airflow_kafka_offsets.core.spec import build_spec

from .helpers import produce
from .pipeline import plan

CHILD = """
import os, psycopg2
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.ledger import Actor, Ledger
from airflow_kafka_offsets.service.plan import load_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink

ledger = Ledger(lambda: psycopg2.connect(os.environ["CHILD_DSN"]), schema=os.environ["CHILD_SCHEMA"])
batch = load_batch(ledger, "crashed", None)
submitter = settings_runner(SparkSettings(jars=tuple(os.environ["CHILD_JARS"].split(","))))
run_batch(ledger, LocalDirectorySink(os.environ["CHILD_ROOT"]), batch, submitter,
          {"bootstrap.servers": os.environ["CHILD_BOOTSTRAP"]}, Actor(dag_id="tests", run_id="crash"))
"""


def copies_of(name: str, private_tmp: Path) -> list[Path]:
    """Every file named ``name`` in Spark's default local directory and in the worker's temp dir."""
    found = set(Path("/tmp").glob(f"spark-*/userFiles-*/{name}")) | set(private_tmp.rglob(name))
    return sorted(found)


def running_attempt(ledger) -> str | None:
    with ledger.transaction() as tx:
        row = tx.fetchone("SELECT attempt_id FROM {s}.attempts WHERE pipeline = 'crashed' AND state = 'running'")
    return None if row is None else row[0]


def test_sigkill_mid_spark_leaves_no_copy_of_the_job_file_outside_the_private_directory(
    stack, ledger, schema, make_topic, tmp_path
):
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 2000, partitions=2)
    root = tmp_path / "out"
    assert plan(ledger, build_spec("crashed", [topic], str(root)), stack).plan.records_planned == 2000
    worker_tmp = tmp_path / "worker-tmp"  # the worker's TMPDIR; Spark's JVM itself defaults to /tmp
    worker_tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(worker_tmp),
        "CHILD_DSN": stack.pg_dsn(),
        "CHILD_SCHEMA": schema,
        "CHILD_JARS": ",".join(stack.connector_jars),
        "CHILD_ROOT": str(root),
        "CHILD_BOOTSTRAP": stack.bootstrap_servers,
    }
    worker = subprocess.Popen([sys.executable, "-c", CHILD], env=env, start_new_session=True)
    job_name, spark_copies = None, []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and worker.poll() is None:
            attempt = running_attempt(ledger)
            if attempt:
                job_name = f"kafka-batch-{attempt}.json"
                spark_copies = [p for p in copies_of(job_name, worker_tmp) if p.parent.name.startswith("userFiles-")]
                if spark_copies:
                    break
            time.sleep(0.05)
        assert worker.poll() is None, f"the worker ended (code {worker.returncode}) before Spark copied the job file"
        assert spark_copies, "Spark never copied the job file within 240 s"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker's whole process group, no clean-up
        worker.wait(timeout=60)

    # the job file and every copy of it lie inside one private directory, and nowhere else
    (private,) = [p.parent for p in worker_tmp.glob(f"kafka-batch-*/{job_name}")]
    mode = private.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid == os.getuid()
    left = copies_of(job_name, worker_tmp)
    outside = [str(p) for p in left if private not in p.parents]
    assert outside == [], f"copies of the job file outside its private directory {private}: {outside}"
    assert len(left) >= 2  # the job file and Spark's copy, both inside
    with ledger.transaction() as tx:
        assert tx.planned_batch_id("crashed") == 1  # the batch waits for its replay
