"""A large backlog drained by the catch-up operation in capped batches, with the Spark driver's memory bounded.

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.catch_up [--records 10000000] [--cap 2000000]
        [--driver-memory 1g]
    scripts/bench --only catch_up [--catch-up-records N] [--catch-up-cap N] [--driver-memory 1g]

Produces ``--records`` records (about 500 B each, 8 partitions) into a new topic, then runs the
package's ``catch_up`` operation over it: a pipeline with ``max_records_per_batch=--cap`` planned,
read by spark-submit (``local[2]``, ``spark.driver.memory`` = ``--driver-memory``) and committed
batch after batch until no lag is left. While it runs, the resident memory of every process
spark-submit starts (the driver's JVM and its Python) is sampled every 0.2 s: the figure is the
largest sum seen, beside the JVM heap's bound. Every record must be committed once: the ledger's
committed count and the Parquet files' rows are both the produced count. A figure, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import loadavg, now, parquet_rows, prepare_environment, say

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants_rss(root: int) -> int:
    """Resident bytes of every process below ``root`` (not ``root`` itself)."""
    tree, total = _children(), 0
    todo = list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        todo += tree.get(pid, [])
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
        except (OSError, IndexError, ValueError):
            continue
    return total


@dataclass
class PeakMemory:
    """The largest resident memory of this process's descendants, sampled in a thread while it runs."""

    interval_s: float = 0.2
    peak_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak_bytes = max(self.peak_bytes, descendants_rss(os.getpid()))


def measure(
    info: Any, records: int, cap: int, driver_memory: str, partitions: int = 8, record_bytes: int = 500
) -> dict[str, Any]:
    """Produce the backlog, drain it with catch-up through spark-submit, and return the section's figures."""
    from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
    from airflow_kafka_offsets.core.actor import Actor
    from airflow_kafka_offsets.core.spec import build_spec
    from airflow_kafka_offsets.runtime import settings_runner
    from airflow_kafka_offsets.service.context import OperationContext
    from airflow_kafka_offsets.service.operations.catch_up import catch_up
    from airflow_kafka_offsets.spark.settings import SparkSettings
    from benchmarks import datagen
    from benchmarks.common import bench_ledger, drop_ledger

    dataset = datagen.produce(info.bootstrap_servers, records, partitions, record_bytes)
    ledger = bench_ledger(info)
    workdir = Path(tempfile.mkdtemp(prefix="ako-bench-catch-up-"))
    pipeline = f"bench-catch-up-{uuid.uuid4().hex[:8]}"
    spec = build_spec(pipeline, [dataset.topic], str(workdir / "out"), max_records_per_batch=cap)
    kafka_properties = {"bootstrap.servers": info.bootstrap_servers}
    submit = settings_runner(
        SparkSettings(conn_id="spark_default", jars=tuple(info.connector_jars), driver_memory=driver_memory)
    )
    actor = Actor(operation="catch-up", cli="benchmarks.catch_up")
    ctx = OperationContext(
        ledger, KafkaOffsetsClient(kafka_properties), actor, submit=submit, kafka_properties=kafka_properties
    )
    try:
        with ledger.transaction() as tx:
            tx.lock_pipeline(spec)
        max_batches = -(-records // cap) + 1
        say(f"catch-up of {records:,} records in batches of at most {cap:,}, driver memory {driver_memory}")
        started = now()
        with PeakMemory() as memory:
            outcome = catch_up(ctx, pipeline, max_batches)
        seconds = now() - started
        rows, files, size = parquet_rows(workdir / "out")
        if outcome.records != records or rows != records or outcome.lag_left:
            raise RuntimeError(
                f"catch-up committed {outcome.records} records ({rows} in Parquet, lag left {outcome.lag_left}), "
                f"{records} were produced"
            )
        batch_records = [b.records_committed for b in ledger.committed_batches(pipeline)]
    finally:
        drop_ledger(ledger)
        datagen.delete_topic(info.bootstrap_servers, dataset.topic)
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "records": records,
        "partitions": partitions,
        "payload_bytes": dataset.payload_bytes,
        "cap": cap,
        "driver_memory": driver_memory,
        "batches": outcome.batches,
        "batch_records": batch_records,
        "seconds": round(seconds, 1),
        "records_per_s": round(records / seconds),
        "output_files": files,
        "output_bytes": size,
        "peak_rss_bytes": memory.peak_bytes,
        "loadavg_at_end": loadavg(),
    }


def summary_line(result: dict[str, Any]) -> str:
    return (
        f"catch-up of {result['records']:,} records in {result['batches']} batches of at most {result['cap']:,} "
        f"by spark-submit (local[2], spark.driver.memory {result['driver_memory']}): {result['seconds']:.1f} s, "
        f"{result['records_per_s']:,} records/s; the driver's processes (JVM + Python) peaked at "
        f"{result['peak_rss_bytes'] / 2**30:.2f} GiB resident"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catch_up", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--cap", type=int, default=2_000_000, help="the pipeline's max_records_per_batch")
    parser.add_argument("--driver-memory", default="1g")
    args = parser.parse_args(argv)
    import devstack

    info = devstack.up()
    prepare_environment(info)
    result = measure(info, args.records, args.cap, args.driver_memory)
    print(json.dumps(result, indent=1))
    say(summary_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
