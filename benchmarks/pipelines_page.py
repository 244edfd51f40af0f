"""Speed of the "Kafka pipelines" page on a large generated ledger (a figure, not a test).

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.pipelines_page [--partitions 10000] [--batches 1000000]

Bulk-loads one pipeline with ``--partitions`` cursors and ``--batches`` batches into a throwaway
schema of the local stack's PostgreSQL: the newest 10 batches span every partition (the last one
planned, in flight, with a dead attempt), the older ones one partition each, and every batch has a
succeeded attempt. It then times what one page request runs (read-only ledger transaction, lag
arithmetic, HTML) for the overview and for the first and last page of partitions, and shows the
query plans. Kafka is a stand-in giving every partition an end offset (its own time, one
ListOffsets request per broker, is not part of the figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

import psycopg2

import devstack
from benchmarks.common import prepare_environment, say
from benchmarks.scaling import STEP, TOPIC, FakeOffsets, LedgerBench

if TYPE_CHECKING:  # imported where used, after the benchmark's environment is set
    from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
    from airflow_kafka_offsets.core.retention import TopicRetention
    from airflow_kafka_offsets.service.overview import KafkaPositions

T = TypeVar("T")

RECENT = 10  # batches spanning every partition at the top of the history
LAG = 25  # records per partition beyond the cursor


class FakeKafka:
    """The calls the page makes, answered from memory."""

    def __init__(self, partitions: int, latest: int) -> None:
        self.offsets_of = FakeOffsets(partitions, latest)

    def offsets(self, topics: Sequence[str]) -> dict[TopicPartition, PartitionOffsets]:
        return self.offsets_of(topics)

    def timestamps_at(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, datetime | None]:
        return {tp: datetime.now(UTC) - timedelta(minutes=5) for tp in positions}

    def retention(self, topics: Sequence[str]) -> dict[str, TopicRetention]:
        from airflow_kafka_offsets.core.retention import TopicRetention

        return {t: TopicRetention(retention_ms=7 * 86_400_000, retention_bytes=None) for t in topics}


def load(bench: LedgerBench, name: str, partitions: int, batches: int) -> tuple[float, int]:
    """Generate the ledger; returns (seconds, the cursor of every partition)."""
    old = batches - RECENT
    base = ((old - 1) // partitions + 1) * STEP  # above every old range
    cursor = base + (RECENT - 1) * STEP  # the planned batch starts here
    started = time.perf_counter()
    spec = bench.spec(name)
    with bench.ledger.transaction() as tx:
        deferred = bench.drop_checks(tx)
        tx.execute(
            "INSERT INTO {s}.pipelines (name, spec, next_batch_id) VALUES (%s, %s::jsonb, %s)",
            (name, json.dumps(spec.to_json(), sort_keys=True), batches + 1),
        )
        tx.execute(
            "INSERT INTO {s}.batches (pipeline, batch_id, epoch, state, output_uri, records_planned,"
            " records_committed, output_bytes, planned_at, committed_at)"
            " SELECT %s, b, 0, CASE WHEN b = %s THEN 'planned' ELSE 'committed' END, 'file:///bench/' || b,"
            "        CASE WHEN b > %s THEN %s ELSE %s END, CASE WHEN b = %s THEN NULL WHEN b > %s THEN %s ELSE %s END,"
            "        0, now() - make_interval(secs => %s - b), CASE WHEN b = %s THEN NULL"
            "        ELSE now() - make_interval(secs => %s - b) END"
            " FROM generate_series(1, %s) b",
            (
                name,
                batches,
                old,
                partitions * STEP,
                STEP,
                batches,
                old,
                partitions * STEP,
                STEP,
                batches,
                batches,
                batches,
                batches,
            ),
        )
        tx.execute(
            "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
            " start_offset, end_offset, records)"
            " SELECT %s, b, 0, %s, (b - 1) %% %s, ((b - 1) / %s) * %s, ((b - 1) / %s) * %s, ((b - 1) / %s + 1) * %s, %s"
            " FROM generate_series(1, %s) b",
            (name, TOPIC, partitions, partitions, STEP, partitions, STEP, partitions, STEP, STEP, old),
        )
        tx.execute(
            "INSERT INTO {s}.batch_ranges (pipeline, batch_id, epoch, topic, partition, cursor_offset,"
            " start_offset, end_offset, records)"
            " SELECT %s, %s + j, 0, %s, p, %s + (j - 1) * %s, %s + (j - 1) * %s, %s + j * %s, %s"
            " FROM generate_series(1, %s) j, generate_series(0, %s) p",
            (name, old, TOPIC, base, STEP, base, STEP, base, STEP, STEP, RECENT, partitions - 1),
        )
        tx.execute(
            "INSERT INTO {s}.cursors (pipeline, topic, partition, next_offset) SELECT %s, %s, p, %s"
            " FROM generate_series(0, %s) p",
            (name, TOPIC, cursor, partitions - 1),
        )
        tx.execute(
            "INSERT INTO {s}.attempts (attempt_id, pipeline, batch_id, state, staging_uri, started_at, finished_at,"
            " lease_expires_at) SELECT md5(%s || b::text), %s, b,"
            " CASE WHEN b = %s THEN 'running' ELSE 'succeeded' END, 'file:///bench/_staging/' || b,"
            " now() - make_interval(secs => %s - b), CASE WHEN b = %s THEN NULL ELSE now() END,"
            " CASE WHEN b = %s THEN now() - interval '1 minute' END FROM generate_series(1, %s) b",
            (name, name, batches, batches, batches, batches, batches),
        )
        bench.restore_checks(tx, deferred)
    bench.vacuum_analyze()
    return time.perf_counter() - started, cursor


def timed(fn: Callable[[], T], runs: int) -> tuple[float, T]:
    """Median milliseconds of ``runs`` calls (after one warm-up), and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return round(1000 * statistics.median(times), 1), result


def plans(bench: LedgerBench, name: str, kafka: KafkaPositions) -> dict[str, str]:
    """EXPLAIN ANALYZE of every query a request of the pipeline's first page runs (index use, time inside
    PostgreSQL): the statements are recorded as the page runs them, so they are the ledger's own."""
    from airflow_kafka_offsets.service.overview import pipeline_detail

    bench.timer.recorded = []
    try:
        pipeline_detail(bench.ledger, kafka, name, 1)
        statements = [(sql, params) for sql, params in bench.timer.recorded if sql.lstrip().startswith("SELECT")]
    finally:
        bench.timer.recorded = None
    out = {}
    conn = psycopg2.connect(bench.info.pg_dsn())
    try:
        conn.set_session(readonly=True)
        with conn.cursor() as cur:
            for number, (sql, params) in enumerate(statements, 1):
                cur.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql, params)
                shape = " ".join(sql.replace(f'"{bench.schema}".', "").split())
                out[f"{number}. {shape[:100]}"] = "\n".join(r[0] for r in cur.fetchall())
    finally:
        conn.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5, help="timed requests per page (median shown)")
    p.add_argument("--keep", action="store_true", help="keep the generated schema (its name is printed)")
    args = p.parse_args(argv)
    info = devstack.current()
    prepare_environment(info)

    from airflow_kafka_offsets.plugins.pipelines_page import overview_page, pipeline_page
    from airflow_kafka_offsets.service.overview import PARTITIONS_PER_PAGE, overview, pipeline_detail

    bench = LedgerBench(info)
    try:
        name = "big"
        say(f"generating {args.batches:,} batches over {args.partitions:,} partitions in schema {bench.schema}")
        seconds, cursor = load(bench, name, args.partitions, args.batches)
        say(f"generated in {seconds:.0f} s")
        kafka = FakeKafka(args.partitions, cursor + LAG)
        last_page = -(-args.partitions // PARTITIONS_PER_PAGE)
        trigger = "/dags/kafka_offsets_manual_ops"
        results = {
            "overview": timed(lambda: overview_page(overview(bench.ledger, kafka), "pipelines/", trigger), args.runs),
            "pipeline, first page": timed(
                lambda: pipeline_page(pipeline_detail(bench.ledger, kafka, name, 1), "../", trigger), args.runs
            ),
            f"pipeline, page {last_page}": timed(
                lambda: pipeline_page(pipeline_detail(bench.ledger, kafka, name, last_page), "../", trigger),
                args.runs,
            ),
        }
        detail = pipeline_detail(bench.ledger, kafka, name, 1)
        assert detail.summary.lag_records == args.partitions * LAG, detail.summary
        assert detail.partitions[0].committed_offset == cursor and detail.summary.in_flight is not None
        assert detail.summary.dead_attempts == 1 and len(detail.batches) == RECENT
        print(
            f"Kafka pipelines page: {args.partitions:,} partitions, {args.batches:,} batches, "
            f"median of {args.runs} requests (ledger read + lag + HTML; Kafka stand-in)"
        )
        for label, (ms, html) in results.items():
            print(f"  {label:<22} {ms:>8.1f} ms  ({len(html) / 1000:.0f} kB of HTML)")
        for label, plan in plans(bench, name, kafka).items():
            print(f"\n{label}:\n{plan}")
    finally:
        if args.keep:
            say(f"kept schema {bench.schema}")
        else:
            bench.drop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
