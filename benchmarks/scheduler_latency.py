"""A one-task batch under the stack's real scheduler, against an empty one-task DAG on the same scheduler.

What a user of frequent small batches feels: from the moment the scheduler starts a run to the
moment the batch is committed in the ledger. The contenders are the two DAGs of
``benchmarks/dags/ako_bench_scheduler.py``, triggered alternately (one uncounted run of each
first, which also creates the pipeline): ``ako_bench_one_task`` reads ``--records`` new records a
run with ``KafkaBatchOperator`` (plan, read and commit in one task) on the given Spark
connection; ``ako_bench_empty`` runs one task that does nothing. Both are queued and started by
the scheduler (LocalExecutor) as scheduled runs are; the figure is the median of
``run start -> batch committed`` (the ledger's ``committed_at``) minus the median of the empty
run's ``start -> end``.
"""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import say, spread
from benchmarks.datagen import create_topic, produce

EMPTY_DAG = "ako_bench_empty"
ONE_TASK_DAG = "ako_bench_one_task"
PARTITIONS = 8


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Deployment:
    """The stack's Airflow, through its REST API (one token for the whole run)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from devstack import airflow

        self.cfg = cfg
        self.api = airflow.api
        self.bearer = airflow.token(cfg)

    def wait_for_dags(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = {d["dag_id"] for d in self.api(self.cfg, "dags?tags=benchmark", self.bearer)["dags"]}
            if {EMPTY_DAG, ONE_TASK_DAG} <= found:
                return
            time.sleep(2)
        raise RuntimeError(f"Airflow at {self.cfg['url']} did not load benchmarks/dags in {timeout_s:.0f}s")

    def run(self, dag_id: str, conf: dict[str, Any] | None = None, timeout_s: float = 600) -> dict[str, Any]:
        """Trigger a run, wait for its end; the run's record (``start_date``, ``end_date``, ``state``)."""
        body = {"logical_date": None, "dag_run_id": f"bench_{uuid.uuid4().hex[:10]}", "conf": conf or {}}
        run_id = self.api(self.cfg, f"dags/{dag_id}/dagRuns", self.bearer, method="POST", body=body)["dag_run_id"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found: dict[str, Any] = self.api(self.cfg, f"dags/{dag_id}/dagRuns/{run_id}", self.bearer)
            if found["state"] in ("success", "failed"):
                if found["state"] != "success":
                    raise RuntimeError(f"{dag_id} run {run_id} failed: see its task log in {self.cfg['home']}/logs")
                return found
            time.sleep(0.2)
        raise RuntimeError(f"{dag_id} run {run_id} did not end in {timeout_s:.0f}s")


def measure(
    info: Any, cfg: dict[str, Any], spark_conn_id: str, records: int, rounds: int, workdir: Path
) -> dict[str, Any]:
    """``rounds`` runs of each DAG, alternating, after one uncounted run of each."""
    import psycopg2

    from airflow_kafka_offsets.ledger import Ledger

    if spark_conn_id not in cfg.get("connections", []):
        raise RuntimeError(
            f"the stack's Airflow was started without the connection {spark_conn_id!r} (start the Spark Connect "
            "server before Airflow: scripts/stack down, then run the benchmark again)"
        )
    deployment = Deployment(cfg)
    deployment.wait_for_dags()
    topic = create_topic(info.bootstrap_servers, PARTITIONS)
    pipeline = f"bench_sched_{uuid.uuid4().hex[:8]}"
    conf = {
        "pipeline": pipeline,
        "topic": topic,
        "output_root": str(workdir / pipeline),
        "spark_conn_id": spark_conn_id,
    }
    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=cfg["ledger_schema"])
    empty_s: list[float] = []
    to_commit_s: list[float] = []
    run_s: list[float] = []
    for round_ in range(rounds + 1):
        empty = deployment.run(EMPTY_DAG)
        produce(info.bootstrap_servers, records, PARTITIONS, topic=topic)
        batch = deployment.run(ONE_TASK_DAG, conf)
        with ledger.transaction() as tx:
            last = tx.recent_batches(pipeline, 1)[0]
        if last.committed_at is None or last.records_committed != records:
            raise RuntimeError(f"pipeline {pipeline}: the last batch is {last}, expected {records} records committed")
        if round_ == 0:
            continue  # warm-up: a new pipeline, a first session on the server
        start = _when(batch["start_date"])
        empty_s.append((_when(empty["end_date"]) - _when(empty["start_date"])).total_seconds())
        to_commit_s.append((last.committed_at - start).total_seconds())
        run_s.append((_when(batch["end_date"]) - start).total_seconds())
        say(f"scheduler: empty run {empty_s[-1]:.2f}s, one-task batch to commit {to_commit_s[-1]:.2f}s")
    median = {
        "empty_run_s": round(statistics.median(empty_s), 3),
        "one_task_to_commit_s": round(statistics.median(to_commit_s), 3),
        "one_task_run_s": round(statistics.median(run_s), 3),
    }
    return {
        "records": records,
        "partitions": PARTITIONS,
        "rounds": rounds,
        "spark_conn_id": spark_conn_id,
        "median": median,
        "over_empty_s": round(median["one_task_to_commit_s"] - median["empty_run_s"], 3),
        "runs": {"empty_run_s": empty_s, "one_task_to_commit_s": to_commit_s, "one_task_run_s": run_s},
    }


def _lock_waits(dsn: str, stop: Any, seen: list[int]) -> None:
    """Sample the ledger database's ungranted locks every 50 ms (PostgreSQL's own view) until stopped."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                )
                row = cur.fetchone()
                seen.append(int(row[0]) if row else 0)
                stop.wait(0.05)
    finally:
        conn.close()


def measure_many(
    info: Any, cfg: dict[str, Any], spark_conn_id: str, pipelines: int, records: int, workdir: Path
) -> dict[str, Any]:
    """``pipelines`` one-task batches at once, each its own pipeline and topic, on one server and one ledger,
    against one such batch alone (after one uncounted batch of each pipeline)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import psycopg2

    from airflow_kafka_offsets.ledger import Ledger

    deployment = Deployment(cfg)
    deployment.wait_for_dags()
    topics = [create_topic(info.bootstrap_servers, PARTITIONS) for _ in range(pipelines)]
    names = [f"bench_many_{uuid.uuid4().hex[:8]}" for _ in range(pipelines)]
    confs = [
        {"pipeline": n, "topic": t, "output_root": str(workdir / n), "spark_conn_id": spark_conn_id}
        for n, t in zip(names, topics, strict=True)
    ]
    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=cfg["ledger_schema"])

    def batch(conf: dict[str, Any]) -> dict[str, Any]:
        run = deployment.run(ONE_TASK_DAG, conf, timeout_s=1800)
        with ledger.transaction() as tx:
            last = tx.recent_batches(conf["pipeline"], 1)[0]
        if last.committed_at is None or last.records_committed != records:
            raise RuntimeError(f"pipeline {conf['pipeline']}: the last batch is {last}, expected {records} records")
        start = _when(run["start_date"])
        return {"start": start, "committed_at": last.committed_at, "s": (last.committed_at - start).total_seconds()}

    for conf in confs:  # warm-up: create every pipeline
        produce(info.bootstrap_servers, records, PARTITIONS, topic=conf["topic"])
    with ThreadPoolExecutor(pipelines) as pool:
        list(pool.map(batch, confs))
    produce(info.bootstrap_servers, records, PARTITIONS, topic=confs[0]["topic"])
    alone = batch(confs[0])["s"]
    for conf in confs:
        produce(info.bootstrap_servers, records, PARTITIONS, topic=conf["topic"])
    stop, waits = threading.Event(), list[int]()
    sampler = threading.Thread(target=_lock_waits, args=(info.pg_dsn(), stop, waits), daemon=True)
    sampler.start()
    try:
        with ThreadPoolExecutor(pipelines) as pool:
            together = list(pool.map(batch, confs))
    finally:
        stop.set()
        sampler.join()
    first = min(r["start"] for r in together)
    last = max(r["committed_at"] for r in together)
    wall = (last - first).total_seconds()
    slowest = max(r["s"] for r in together)
    say(f"{pipelines} pipelines: {pipelines * records:,} records in {wall:.1f}s; one alone {alone:.1f}s")
    return {
        "pipelines": pipelines,
        "records_per_pipeline": records,
        "spark_conn_id": spark_conn_id,
        "alone_s": round(alone, 3),
        "alone_records_per_s": round(records / alone),
        "together_wall_s": round(wall, 3),
        "together_records_per_s": round(pipelines * records / wall),
        "batch_s": spread([r["s"] for r in together]),
        "slowest_vs_alone": round(slowest / alone, 2),
        "lock_wait_samples": len(waits),
        "samples_with_lock_waits": len([w for w in waits if w]),
        "max_lock_waiters": max(waits, default=0),
    }
