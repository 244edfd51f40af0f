"""Scaling of the ledger and the planner, without Spark or Kafka.

Drives the package's own ``plan_batch`` / ``run_batch`` / ``commit_batch`` against the real
PostgreSQL ledger with a fake offsets source (N partitions, every partition ``step`` records
further at each batch) and a fake Spark submit that writes a report matching the plan, so the
whole ledger path runs: plan (lock, cursors, plan rows, audit), attempt rows, report checks,
publish (a rename), cursor compare-and-set and commit.

- partitions: plan + commit time of one batch at 10 ... 10,000 partitions;
- history: the same with 10 ... 1,000,000 committed batches already in the ledger, bulk-loaded
  with generate_series into a throwaway schema (it must stay flat as history grows).

Every SQL statement is timed on the client (``statements``), to show which query grows.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg2
import psycopg2.extensions

from benchmarks.common import say

if TYPE_CHECKING:  # imported where used, after the benchmark's environment is set
    from airflow_kafka_offsets.core.model import PartitionOffsets, PipelineSpec, TopicPartition

TOPIC = "scale"
STEP = 100  # records per partition and batch


class StatementTimer:
    """Client-side time per SQL statement shape (schema names and whitespace normalised)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.enabled = False
        # When a list: every statement run, whole, with its parameters (for EXPLAIN), timed or not.
        self.recorded: list[tuple[str, Any]] | None = None

    def add(self, sql: str, seconds: float) -> None:
        if not self.enabled:
            return
        shape = re.sub(r'"[a-z0-9_]+"\.', "", " ".join(sql.split()))[:90]
        self.seconds[shape] += seconds
        self.calls[shape] += 1

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def top(self, batches: int, n: int = 6) -> list[dict[str, Any]]:
        ranked = sorted(self.seconds.items(), key=lambda kv: -kv[1])[:n]
        return [
            {
                "sql": sql,
                "ms_per_batch": round(1000 * s / max(batches, 1), 3),
                "calls_per_batch": round(self.calls[sql] / max(batches, 1), 2),
            }
            for sql, s in ranked
        ]


def timed_connect(dsn: str, timer: StatementTimer) -> Callable[[], Any]:
    class TimedCursor(psycopg2.extensions.cursor):
        def execute(self, query: str | bytes, vars: Any = None) -> None:
            sql = query if isinstance(query, str) else query.decode()
            if timer.recorded is not None:
                timer.recorded.append((sql, vars))
            started = time.perf_counter()
            try:
                super().execute(query, vars)
            finally:
                timer.add(sql, time.perf_counter() - started)

    def connect() -> Any:
        started = time.perf_counter()
        conn = psycopg2.connect(dsn, cursor_factory=TimedCursor)
        timer.add("(connect)", time.perf_counter() - started)
        return conn

    return connect


class FakeOffsets:
    """Kafka's offsets for N partitions of one topic; ``advance`` moves every log end by STEP."""

    def __init__(self, partitions: int, latest: int = STEP) -> None:
        self.partitions = partitions
        self.latest = latest

    def advance(self) -> None:
        self.latest += STEP

    def __call__(self, topics: Sequence[str]) -> dict[TopicPartition, PartitionOffsets]:
        from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition

        return {TopicPartition(TOPIC, p): PartitionOffsets(0, self.latest) for p in range(self.partitions)}


def fake_submit(job: dict[str, Any]) -> None:
    """Stand-in for spark-submit: stage a report that matches the plan (and no data)."""
    staging = Path(job["staging_uri"].removeprefix("file://"))
    staging.mkdir(parents=True, exist_ok=True)
    report = {
        "format": 1,
        "pipeline": job["pipeline"],
        "batch_id": job["batch_id"],
        "attempt_id": job["attempt_id"],
        "spark_version": "none",
        "application_id": "benchmark",
        "master": "none",
        "output_bytes": 0,
        "partitions": [
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "records": r["end"] - r["start"],
                "min_offset": r["start"],
                "max_offset": r["end"] - 1,
                "distinct_offsets": r["end"] - r["start"],
                "payload_bytes": 0,
            }
            for r in job["ranges"]
        ],
    }
    (staging / "_kafka_batch_report.json").write_text(json.dumps(report))


class LedgerBench:
    """One throwaway schema and output root; drop() removes both."""

    def __init__(self, info: Any) -> None:
        from airflow_kafka_offsets.ledger import Ledger

        self.info = info
        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        self.timer = StatementTimer()
        self.ledger = Ledger(timed_connect(info.pg_dsn(), self.timer), schema=self.schema)
        self.ledger.migrate()
        self.root = Path(tempfile.mkdtemp(prefix="ako-bench-scale-"))

    def drop(self) -> None:
        with self.ledger.transaction() as tx:
            tx.execute("DROP SCHEMA {s} CASCADE")
        shutil.rmtree(self.root, ignore_errors=True)

    def spec(self, name: str) -> PipelineSpec:
        from airflow_kafka_offsets.core.spec import build_spec

        return build_spec(name, [TOPIC], str(self.root))

    def one_batch(self, spec: PipelineSpec, offsets: FakeOffsets) -> dict[str, float]:
        from airflow_kafka_offsets.core.actor import Actor
        from airflow_kafka_offsets.service.commit import commit_batch
        from airflow_kafka_offsets.service.plan import plan_batch
        from airflow_kafka_offsets.service.read import run_batch
        from airflow_kafka_offsets.sinks import LocalDirectorySink

        actor = Actor(dag_id="benchmarks", run_id="scaling")
        sink = LocalDirectorySink(spec.output_root)
        offsets.advance()
        t0 = time.perf_counter()
        outcome = plan_batch(self.ledger, spec, offsets, sink, actor)
        t1 = time.perf_counter()
        if outcome.plan is None or outcome.replayed:
            raise RuntimeError(f"expected a new plan, got {outcome}")
        run_batch(self.ledger, sink, outcome.plan, fake_submit, {}, actor)
        t2 = time.perf_counter()
        committed = commit_batch(self.ledger, sink, spec.name, outcome.plan.batch_id, actor)
        t3 = time.perf_counter()
        if not committed.committed_now:
            raise RuntimeError("batch was not committed")
        shutil.rmtree(Path(outcome.plan.output_uri.removeprefix("file://")), ignore_errors=True)
        return {"plan_s": t1 - t0, "attempt_s": t2 - t1, "commit_s": t3 - t2}

    def measure(self, spec: PipelineSpec, offsets: FakeOffsets, batches: int) -> dict[str, Any]:
        self.one_batch(spec, offsets)  # warm-up (and, on a new pipeline, creates the cursors)
        self.timer.reset()
        self.timer.enabled = True
        runs = [self.one_batch(spec, offsets) for _ in range(batches)]
        self.timer.enabled = False
        result: dict[str, Any] = {k: round(1000 * statistics.median(r[k] for r in runs), 3) for k in runs[0]}
        result = {k.replace("_s", "_ms"): v for k, v in result.items()}
        result["plan_commit_ms"] = round(result["plan_ms"] + result["commit_ms"], 3)
        result["batch_ledger_ms"] = round(result["plan_ms"] + result["attempt_ms"] + result["commit_ms"], 3)
        result["batches_timed"] = batches
        result["statements"] = self.timer.top(batches)
        return result

    def drop_checks(self, tx: Any) -> list[tuple[str, str, str]]:
        """Drop the foreign keys (and any exclusion constraint) and disable the overlap triggers for a bulk
        load; returns the constraints for restore_checks.

        Row-by-row checks would take most of an hour for a million batches (the history is generated
        without overlaps): they are put back (validated, index rebuilt) after the load instead.
        """
        deferred: list[tuple[str, str, str]] = tx.fetchall(
            "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
            " WHERE c.connamespace = %s::regnamespace AND c.contype IN ('x', 'f')"
            "   AND c.conrelid::regclass::text NOT LIKE '%%pipelines' ORDER BY c.contype DESC",
            (self.schema,),
        )
        for table, constraint, _ in deferred:
            tx.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{constraint}"')
        tx.execute("ALTER TABLE {s}.batch_ranges DISABLE TRIGGER USER")
        return deferred

    def restore_checks(self, tx: Any, deferred: list[tuple[str, str, str]]) -> None:
        tx.execute("ALTER TABLE {s}.batch_ranges ENABLE TRIGGER USER")
        tx.execute("SET LOCAL maintenance_work_mem = '1GB'")
        for table, constraint, definition in reversed(deferred):
            tx.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{constraint}" {definition}')

    def vacuum_analyze(self) -> None:
        conn = psycopg2.connect(self.info.pg_dsn())
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(
                    f'VACUUM ANALYZE "{self.schema}".batches, "{self.schema}".batch_ranges,'
                    f' "{self.schema}".attempts, "{self.schema}".audit, "{self.schema}".cursors'
                )
        finally:
            conn.close()

    def load_history(self, spec: PipelineSpec, history: int, partitions: int) -> float:
        """Bulk-load ``history`` committed batches of ``partitions`` partitions (as plan/commit leave them)."""
        started = time.perf_counter()
        name = spec.name
        with self.ledger.transaction() as tx:
            deferred = self.drop_checks(tx)
            tx.execute(
                "INSERT INTO {s}.pipelines (name, spec, next_batch_id) VALUES (%s, %s::jsonb, %s)",
                (name, json.dumps(spec.to_json(), sort_keys=True), history + 1),
            )
            tx.execute(
                "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned,"
                " records_committed, output_bytes, planned_at, committed_at, planned_by, committed_by)"
                " SELECT %s, b, 0, 'committed', %s || lpad(b::text, 12, '0'), %s, %s, 0,"
                "        now() - make_interval(secs => %s - b), now() - make_interval(secs => %s - b),"
                '        \'{{"dag_id": "history"}}\', \'{{"dag_id": "history"}}\''
                " FROM generate_series(1, %s) b",
                (
                    name,
                    f"file://{self.root}/{name}/batch=",
                    partitions * STEP,
                    partitions * STEP,
                    history,
                    history,
                    history,
                ),
            )
            tx.execute(
                "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
                " start_offset, end_offset, records, min_offset, max_offset, payload_bytes)"
                " SELECT %s, b, 0, %s, p, (b - 1) * %s, (b - 1) * %s, b * %s, %s, (b - 1) * %s, b * %s - 1, 0"
                " FROM generate_series(1, %s) b, generate_series(0, %s) p",
                (name, TOPIC, STEP, STEP, STEP, STEP, STEP, STEP, history, partitions - 1),
            )
            tx.execute(
                "INSERT INTO {s}.cursors (pipeline, topic, partition, next_offset)"
                " SELECT %s, %s, p, %s FROM generate_series(0, %s) p",
                (name, TOPIC, history * STEP, partitions - 1),
            )
            tx.execute(
                "INSERT INTO {s}.attempts (attempt_id, pipeline, batch_id, state, staging_uri, finished_at)"
                " SELECT md5(%s || b::text), %s, b, 'succeeded', %s || b::text, now() FROM generate_series(1, %s) b",
                (name, name, f"file://{self.root}/_staging/{name}/", history),
            )
            tx.execute(
                "INSERT INTO {s}.audit (pipeline, batch_id, event, detail)"
                " SELECT %s, b, e, '{{}}' FROM generate_series(1, %s) b, unnest(ARRAY['planned', 'committed']) e",
                (name, history),
            )
            self.restore_checks(tx, deferred)
        self.vacuum_analyze()
        return time.perf_counter() - started


def scale_partitions(info: Any, counts: Sequence[int], batches: int) -> list[dict[str, Any]]:
    results = []
    bench = LedgerBench(info)
    try:
        for n in counts:
            spec = bench.spec(f"partitions-{n}")
            result = {"partitions": n, "history": 0, **bench.measure(spec, FakeOffsets(n), batches)}
            say(f"scaling: {n:>6} partitions: plan {result['plan_ms']:.1f} ms, commit {result['commit_ms']:.1f} ms")
            results.append(result)
    finally:
        bench.drop()
    return results


def scale_history(info: Any, sizes: Sequence[int], partitions: int, batches: int) -> list[dict[str, Any]]:
    results = []
    for size in sizes:
        bench = LedgerBench(info)  # one schema per size: each ledger holds exactly that history
        try:
            spec = bench.spec(f"history-{size}")
            say(f"scaling: loading {size:,} committed batches x {partitions} partitions")
            load_s = bench.load_history(spec, size, partitions)
            offsets = FakeOffsets(partitions, latest=size * STEP)
            result = {
                "partitions": partitions,
                "history": size,
                "load_s": round(load_s, 1),
                **bench.measure(spec, offsets, batches),
            }
            say(
                f"scaling: {size:>9,} batches of history: plan {result['plan_ms']:.1f} ms, "
                f"commit {result['commit_ms']:.1f} ms (loaded in {load_s:.0f}s)"
            )
            results.append(result)
        finally:
            bench.drop()
    return results


def run_scaling(
    info: Any, partition_counts: Sequence[int], history_sizes: Sequence[int], history_partitions: int, batches: int
) -> dict[str, Any]:
    logging.getLogger("airflow_kafka_offsets").setLevel(logging.WARNING)
    return {
        "step_records_per_partition": STEP,
        "batches_timed": batches,
        "partitions": scale_partitions(info, partition_counts, batches),
        "history": scale_history(info, history_sizes, history_partitions, batches),
    }
