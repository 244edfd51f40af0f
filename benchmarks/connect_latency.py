"""One small batch from plan to commit: Spark Connect on a warm server against spark-submit, in one run.

    python -m benchmarks.connect_latency [--records 10000] [--batches 3] [--submit-batches 1]

Starts the local stack with its Spark Connect server (``scripts/stack up --spark-connect``) if it is
not running, warms the server with one batch that is not counted, then times ``--batches`` batches
of ``--records`` fresh records each (a topic of 4 partitions per batch) through the service steps
(plan, read, commit), in Connect mode and then in spark-submit mode. Every batch is checked: the
committed count is the produced count. Prints per mode the seconds of each step and the median.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from typing import Any

from benchmarks.common import CONNECT_CONN_ID, REPO, loadavg, median, now, prepare_environment, say

PARTITIONS = 4


def one_batch(info: Any, ledger: Any, conn_id: str, records: int, workdir: str) -> dict[str, float]:
    """Produce ``records`` into a new topic, then plan, read and commit them once; seconds per step."""
    from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
    from airflow_kafka_offsets.core.spec import build_spec
    from airflow_kafka_offsets.runtime import settings_runner
    from airflow_kafka_offsets.service.commit import commit_batch
    from airflow_kafka_offsets.service.plan import plan_batch
    from airflow_kafka_offsets.service.read import run_batch
    from airflow_kafka_offsets.sinks import LocalDirectorySink
    from airflow_kafka_offsets.spark.settings import SparkSettings
    from benchmarks.contenders import ACTOR
    from benchmarks.datagen import produce

    data = produce(info.bootstrap_servers, records, PARTITIONS)
    spec = build_spec(f"lat-{uuid.uuid4().hex[:8]}", [data.topic], f"{workdir}/{conn_id}")
    sink = LocalDirectorySink(spec.output_root)
    kafka_props = {"bootstrap.servers": info.bootstrap_servers}
    runner = settings_runner(SparkSettings(conn_id=conn_id, jars=tuple(info.connector_jars)))
    t0 = now()
    outcome = plan_batch(ledger, spec, KafkaOffsetsClient(kafka_props).offsets, sink, ACTOR)
    t1 = now()
    assert outcome.plan is not None
    run_batch(ledger, sink, outcome.plan, runner, kafka_props, ACTOR)
    t2 = now()
    committed = commit_batch(ledger, sink, spec.name, outcome.plan.batch_id, ACTOR)
    t3 = now()
    if committed.records != records:
        raise RuntimeError(f"{conn_id}: committed {committed.records} records, {records} were produced")
    return {"plan_s": t1 - t0, "read_s": t2 - t1, "commit_s": t3 - t2, "total_s": t3 - t0}


def trivial_connect_job(conn_id: str) -> float:
    """Seconds of ``spark.range(10).count()`` on a new session of the server: its floor on this machine."""
    from airflow_kafka_offsets.hooks.spark import spark_connection
    from airflow_kafka_offsets.spark.connect import connect_mode, remote_session

    with connect_mode():
        start = now()
        spark = remote_session(spark_connection(conn_id).connect_url())
        try:
            spark.range(10).count()
        finally:
            spark.stop()
        return now() - start


def measure(info: Any, ledger: Any, conn_id: str, records: int, batches: int, workdir: str) -> list[dict[str, float]]:
    """Time ``batches`` batches; on a Connect server, each is followed by a trivial job (``trivial_s``)."""
    runs = []
    for n in range(batches):
        run = one_batch(info, ledger, conn_id, records, workdir)
        if conn_id == CONNECT_CONN_ID:
            run["trivial_s"] = trivial_connect_job(conn_id)
        say(f"{conn_id} batch {n + 1}/{batches}: " + ", ".join(f"{k} {v:.3f}" for k, v in run.items()))
        runs.append(run)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.connect_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=3, help="timed batches on the warm Connect server")
    parser.add_argument("--submit-batches", type=int, default=1, help="timed batches with spark-submit")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "scripts"))  # the local stack's package, as scripts/bench puts it on PYTHONPATH
    import devstack
    from benchmarks.common import bench_ledger, drop_ledger

    info = devstack.up(spark_connect_server=True)
    prepare_environment(info)
    ledger = bench_ledger(info)
    workdir = tempfile.mkdtemp(prefix="ako-bench-connect-")
    try:
        say("warming the Connect server with one batch (not counted)")
        one_batch(info, ledger, CONNECT_CONN_ID, args.records, workdir)
        connect = measure(info, ledger, CONNECT_CONN_ID, args.records, args.batches, workdir)
        submit = measure(info, ledger, "spark_default", args.records, args.submit_batches, workdir)
    finally:
        drop_ledger(ledger)
    result = {
        "records_per_batch": args.records,
        "partitions": PARTITIONS,
        "loadavg_at_end": loadavg(),
        "spark_connect": {"batches": connect, "median_total_s": median(r["total_s"] for r in connect)},
        "spark_submit": {"batches": submit, "median_total_s": median(r["total_s"] for r in submit)},
    }
    print(json.dumps(result, indent=2))
    c, s = result["spark_connect"]["median_total_s"], result["spark_submit"]["median_total_s"]
    print(
        f"{args.records:,}-record batch, plan to commit: Spark Connect (warm server) {c:.2f} s median of "
        f"{len(connect)}, spark-submit {s:.2f} s median of {len(submit)} ({s / c:.1f}x); "
        f"load average {' '.join(map(str, loadavg()))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
