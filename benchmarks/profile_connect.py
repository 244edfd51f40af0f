"""Where a small batch's time goes on a warm Spark Connect server: each step of the app, timed.

Starts the local stack with its Spark Connect server if needed, warms the server with one
uncounted batch, then runs ``--batches`` batches of ``--records`` fresh records (a topic of 4
partitions each) through ``plan_batch``, ``run_batch`` and ``commit_batch`` with the
``spark_connect_default`` connection, as ``connect_latency.py`` does. The app's functions are
wrapped with timers (its code is unchanged), so each batch splits into: session and settings,
version check, parallelism, the Kafka read + Parquet write job, the footers of its proof (or the
read-back check job of a batch of many ranges), the output's size, the report, and the ledger's steps
around them. Prints the median of each step.
With ``--against-available-now``, one topic of ``--records`` records is read in turn by the package's
batch and by Structured Streaming's AvailableNow on the same server (``benchmarks/streaming_app.py``),
``--batches`` rounds after an uncounted one: wall seconds and the CPU seconds the server's JVM used
(``/proc/<pid>/stat``, steadier than the wall clock on a shared machine), the package's split by step.
A figure, not a test::

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.profile_connect [--records 10000] [--batches 5]
    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.profile_connect --against-available-now \
        --records 1000000 --batches 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import CONNECT_CONN_ID, loadavg, median, prepare_environment, say

PARTITIONS = 4


class Steps:
    """Seconds per named step of the batch being timed, and the CPU seconds the Connect server (``server_pid``)
    used meanwhile."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.server_cpu_s: dict[str, float] = defaultdict(float)
        self.server_pid = server_pid

    def _cpu(self) -> float:
        from benchmarks.contenders import process_cpu

        return process_cpu(self.server_pid) if self.server_pid else 0.0

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), self._cpu()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.server_cpu_s[name] += self._cpu() - cpu

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
        (spark_connect.ConnectRuntime, "footers", "footers (proof)"),
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


def against_available_now(info: Any, records: int, partitions: int, rounds: int) -> dict[str, Any]:
    """The package's batch and AvailableNow on the same warm server and topic, in turn, after one uncounted run
    of each: wall seconds and the server's CPU seconds, the package's split by step."""
    import devstack
    from benchmarks import datagen
    from benchmarks.common import bench_ledger, drop_ledger
    from benchmarks.contenders import PackageRunner, StreamingConnectRunner, process_cpu

    pid = int(devstack.status()["services"]["spark_connect"]["pid"])
    data = datagen.produce(info.bootstrap_servers, records, partitions)
    ledger = bench_ledger(info)
    workdir = Path(tempfile.mkdtemp(prefix="ako-profile-connect-"))
    package, available_now = (
        PackageRunner(info, ledger, workdir, connect_server_pid=pid),
        StreamingConnectRunner(info, workdir, {}, pid),
    )
    runs: list[dict[str, float]] = []
    try:
        for n in range(rounds + 1):
            steps = Steps(pid)
            cpu = process_cpu(pid)
            with timers(steps):
                ours = package(data.topic, records)
            row = {"package_s": ours["seconds"], "package_server_cpu_s": process_cpu(pid) - cpu}
            row |= {f"{k} (server CPU s)": v for k, v in steps.server_cpu_s.items() if v >= 0.005}
            cpu = process_cpu(pid)
            theirs = available_now(data.topic, records)
            row |= {"available_now_s": theirs["seconds"], "available_now_server_cpu_s": process_cpu(pid) - cpu}
            say(("warm-up (not counted): " if n == 0 else f"round {n}/{rounds}: ") + _line(row))
            if n:
                runs.append(row)
    finally:
        drop_ledger(ledger)
        datagen.delete_topic(info.bootstrap_servers, data.topic)
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {name: round(median(r.get(name) for r in runs) or 0.0, 3) for name in runs[0]}
    medians["ratio_records_per_s"] = round(medians["available_now_s"] / medians["package_s"], 3)
    medians["ratio_server_cpu"] = round(medians["package_server_cpu_s"] / medians["available_now_server_cpu_s"], 3)
    return {"records": records, "partitions": partitions, "rounds": rounds, "loadavg": loadavg(), "median": medians}


def _line(row: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in row.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_connect", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument(
        "--against-available-now",
        action="store_true",
        help="time the package's batch and AvailableNow in turn on one topic of --records records over "
        "--partitions partitions (default 8), wall and server CPU seconds, the package's by step",
    )
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args(argv)
    if args.against_available_now:
        import devstack

        info = devstack.up(spark_connect_server=True)
        prepare_environment(info)
        print(json.dumps(against_available_now(info, args.records, args.partitions, args.batches), indent=1))
        return 0
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
