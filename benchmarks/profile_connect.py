"""Where a small batch's time goes on a warm Spark Connect server: each step of the app, timed.

Starts the local stack with its Spark Connect server if needed, warms the server with one
uncounted batch, then runs ``--batches`` batches of ``--records`` fresh records (a topic of 4
partitions each) through ``plan_batch``, ``run_batch`` and ``commit_batch`` with the
``spark_connect_default`` connection, as ``connect_latency.py`` does. The app's functions are
wrapped with timers (its code is unchanged), so each batch splits into: session and settings,
version check, parallelism, the Kafka read + Parquet write job, the read-back check job, the
output's size, the report, and the ledger's steps around them. Prints the median of each step.
A figure, not a test::

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.profile_connect [--records 10000] [--batches 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.common import CONNECT_CONN_ID, loadavg, median, prepare_environment, say

PARTITIONS = 4


class Steps:
    """Seconds per named step of the batch being timed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        return timed


@contextmanager
def timers(steps: Steps) -> Iterator[None]:
    """Wrap the app's steps and the Connect runner's session set-up with timers, and unwrap them after."""
    from pyspark.sql.connect.readwriter import DataFrameWriter

    from airflow_kafka_offsets.spark import connect as spark_connect
    from airflow_kafka_offsets.spark_apps import kafka_batch_check as check

    targets: list[tuple[Any, str, str]] = [
        (spark_connect, "remote_session", "session"),
        (spark_connect, "_set_session_conf", "settings"),
        (spark_connect.ConnectRuntime, "check_versions", "version check"),
        (spark_connect.ConnectRuntime, "parallelism", "parallelism"),
        (DataFrameWriter, "parquet", "Kafka read + Parquet write job"),
        (check, "summarize", "read-back check job"),
        (check, "summarize_collected", "read-back check job"),
        (spark_connect.ConnectRuntime, "output_bytes", "output size"),
        (spark_connect.ConnectRuntime, "write_report", "report"),
        (spark_connect, "_release", "session release"),
    ]
    originals = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in targets]
    for owner, attr, name in targets:
        setattr(owner, attr, steps.wrap(name, getattr(owner, attr)))
    try:
        yield
    finally:
        for owner, attr, original in originals:
            setattr(owner, attr, original)


def one_batch(info: Any, ledger: Any, records: int, workdir: str) -> dict[str, float]:
    """Produce ``records`` into a new topic, then plan, read and commit them (``connect_latency``'s
    batch) with every step of the read timed."""
    from benchmarks.connect_latency import one_batch as timed_batch

    steps = Steps()
    with timers(steps):
        run = timed_batch(info, ledger, CONNECT_CONN_ID, records, workdir)
    rest = run["read_s"] - sum(steps.seconds.values())
    return {
        "plan": run["plan_s"],
        **steps.seconds,
        "commit": run["commit_s"],
        "rest of the read step (ledger, job, report check)": rest,
        "total": run["total_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_connect", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument(
        "--collected-check-max-offsets",
        type=int,
        help="the app's COLLECTED_CHECK_MAX_OFFSETS for this run (0: every batch checked by the aggregate)",
    )
    args = parser.parse_args(argv)
    if args.collected_check_max_offsets is not None:
        from airflow_kafka_offsets.spark_apps import kafka_batch_check as check

        check.COLLECTED_CHECK_MAX_OFFSETS = args.collected_check_max_offsets
    import devstack
    from benchmarks.common import bench_ledger, drop_ledger

    info = devstack.up(spark_connect_server=True)
    prepare_environment(info)
    ledger = bench_ledger(info)
    workdir = tempfile.mkdtemp(prefix="ako-profile-connect-")
    runs = []
    try:
        say("warming the Connect server with one batch (not counted)")
        one_batch(info, ledger, args.records, workdir)
        for n in range(args.batches):
            runs.append(one_batch(info, ledger, args.records, workdir))
            say(f"batch {n + 1}/{args.batches}: " + ", ".join(f"{k} {v:.3f}" for k, v in runs[-1].items()))
    finally:
        drop_ledger(ledger)
    medians = {name: round(median(r[name] for r in runs) or 0.0, 3) for name in runs[0]}
    summary = {"records": args.records, "batches": args.batches, "loadavg": loadavg(), "median_s": medians}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
