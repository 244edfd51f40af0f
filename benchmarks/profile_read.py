"""Where the time of the package's 1M-record read goes: each step of the Spark app as its own job.

One SparkSession (``local[2]``, the package's DEFAULT_SPARK_CONF, its connector jars) on the local
stack runs, alternately and ``--repeat`` times, on one topic produced once:

- ``read_noop_default`` / ``read_noop_large_fetch`` / ``read_noop_poll_<n>``: the Kafka read alone
  (Spark's ``noop`` sink), with the app's settings, with LARGE_FETCH added, and with ``n`` records
  per poll (500: the Java client's default);
- ``write_parquet_<codec>``: the read + Parquet write the app does, with
  the package's zstd and with the alternatives in CODECS;
- ``read_back``: the app's ``summarize`` over the written files (the check of a batch of more ranges than
  its write counts); ``read_back_narrow``: the same without the key and value columns;
- ``observed``: the zstd1 write with the app's counts (``with_range_metrics``: the records its proof needs,
  an observed metric, the key + value bytes coming from the files' size statistics as on Spark 4), with
  them and the bytes per range summed too (``observed_sums``: the app on Spark 3.5, or when it decodes), and
  without (``plain``), in turn: what the counts cost the write's tasks.

The reads, and the writes, reverse their order every run (the first job of a JVM pays for its
compilation). It prints, per step, the median wall clock and, from Spark's event log, its tasks'
run, CPU and GC seconds.
A figure, not a test::

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.profile_read [--records 1000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.common import loadavg, prepare_environment, say

# Larger fetches than the app's (5,000 records per poll, the Java client's 1 MiB per partition): more
# memory held per task, and no faster a read (see the app's READ_DEFAULTS).
LARGE_FETCH = {
    "max.poll.records": "20000",
    "max.partition.fetch.bytes": str(8 * 1024 * 1024),
    "fetch.max.bytes": str(64 * 1024 * 1024),
}

# Parquet writes compared: zstd at Parquet's default level 3 and at level 1 (the package's), snappy
# (writer options, passed to Parquet through the write's Hadoop configuration).
CODECS = {
    "zstd": {"parquet.compression.codec.zstd.level": "3"},
    "zstd1": {"parquet.compression.codec.zstd.level": "1"},
    "snappy": {"compression": "snappy"},
    # the Kafka value written plain, without statistics (tried: no faster than Parquet's fallback)
    "zstd1_value_plain": {
        "parquet.compression.codec.zstd.level": "1",
        "parquet.enable.dictionary#value": "false",
        "parquet.column.statistics.enabled#value": "false",
    },
}


def job_totals(event_log: Path) -> dict[int, dict[str, float]]:
    """Per job id: summed task run, CPU and GC seconds, and the job's wall clock (Spark's event log)."""
    stage_job: dict[int, int] = {}
    jobs: dict[int, dict[str, float]] = {}
    for line in event_log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            jobs[event["Job ID"]] = {"start": event["Submission Time"], "run_s": 0.0, "cpu_s": 0.0, "gc_s": 0.0}
            for stage in event["Stage IDs"]:
                stage_job[stage] = event["Job ID"]
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]]["wall_s"] = (event["Completion Time"] - jobs[event["Job ID"]]["start"]) / 1000
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_job:
            metrics = event.get("Task Metrics") or {}
            job = jobs[stage_job[event["Stage ID"]]]
            job["run_s"] += metrics.get("Executor Run Time", 0) / 1000
            job["cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
            job["gc_s"] += metrics.get("JVM GC Time", 0) / 1000
    return jobs


def main(argv: list[str] | None = None) -> int:  # noqa: C901 - a profiling script: its steps, in order
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--steps",
        type=lambda v: v.split(","),
        default=["read", *CODECS, "read_back", "observed"],
        help="comma list (default all)",
    )
    args = parser.parse_args(argv)

    import devstack

    info = devstack.up()
    prepare_environment(info)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark_apps"))
    import kafka_batch_check as check
    import kafka_batch_read as read_step
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    from airflow_kafka_offsets.spark.settings import DEFAULT_SPARK_CONF
    from benchmarks import datagen

    work = Path(tempfile.mkdtemp(prefix="ako-profile-"))
    events = work / "events"
    events.mkdir()
    builder = SparkSession.builder.master("local[2]").appName("ako-profile-read")
    conf = {
        **DEFAULT_SPARK_CONF,
        "spark.jars": ",".join(info.connector_jars),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{events}",
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    dataset = datagen.produce(info.bootstrap_servers, args.records, args.partitions)
    spark = builder.getOrCreate()
    steps: list[dict[str, Any]] = []
    try:

        def kafka(fetch: dict[str, str]) -> DataFrame:
            reader = (
                spark.read.format("kafka")
                .option("subscribe", dataset.topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .option("includeHeaders", "true")
                .option("failOnDataLoss", "true")
            )
            client = {"bootstrap.servers": info.bootstrap_servers, **fetch, "isolation.level": "read_committed"}
            options = {f"kafka.{key}": value for key, value in client.items()}
            for key, value in options.items():
                reader = reader.option(key, value)
            return reader.load().select(*read_step.COLUMNS)

        def timed(name: str, action: Callable[[], object]) -> None:
            load = loadavg()
            start = time.time()
            action()
            end = time.time()
            steps.append({"step": name, "seconds": round(end - start, 3), "start": start, "end": end, "loadavg": load})
            say(f"{name}: {steps[-1]['seconds']:.1f}s (load {load})")

        def write(out: str, codec: dict[str, str]) -> None:
            writer = kafka(read_step.READ_DEFAULTS).write.mode("overwrite")
            for key, value in codec.items():
                writer = writer.option(key, value)
            writer.parquet(out)

        ranges = [{"topic": dataset.topic, "partition": p} for p in range(dataset.partitions)]

        def write_counted(out: str, observed: bool, sums: bool) -> None:
            records = kafka(read_step.READ_DEFAULTS)
            counted = None
            if observed:
                records, counted = check.with_range_metrics(records, {"ranges": ranges}, sizes_from_footers=not sums)
            records.write.mode("overwrite").option("parquet.compression.codec.zstd.level", "1").parquet(out)
            if counted is not None:
                assert counted()["records"] == args.records

        def read_noop(fetch: dict[str, str]) -> None:
            kafka(fetch).write.format("noop").mode("overwrite").save()

        for rep in range(args.repeat):
            out = str(work / f"out-{rep}")
            if "read" in args.steps:
                reads = [
                    ("read_noop_default", read_step.READ_DEFAULTS),
                    ("read_noop_large_fetch", {**read_step.READ_DEFAULTS, **LARGE_FETCH}),
                    ("read_noop_poll_500", {**read_step.READ_DEFAULTS, "max.poll.records": "500"}),
                    ("read_noop_poll_20000", {**read_step.READ_DEFAULTS, "max.poll.records": "20000"}),
                ]
                for name, fetch in reads[:: 1 if rep % 2 == 0 else -1]:
                    timed(name, functools.partial(read_noop, fetch))
            for name, codec in list(CODECS.items())[:: 1 if rep % 2 == 0 else -1]:
                if name in args.steps:
                    timed(f"write_parquet_{name}", functools.partial(write, f"{out}-{name}", codec))
            if "observed" in args.steps:
                kinds = [("plain", False, False), ("observed", True, False), ("observed_sums", True, True)]
                for name, observed, sums in kinds[:: 1 if rep % 2 == 0 else -1]:
                    timed(f"write_parquet_{name}", functools.partial(write_counted, f"{out}-{name}", observed, sums))
            if "read_back" in args.steps:
                write(out, {})
                written = spark.read.schema(kafka({}).schema).parquet(out)
                timed("read_back", functools.partial(check.summarize, written))
                narrow = written.select(
                    "topic",
                    "partition",
                    "offset",
                    F.lit(None).cast("binary").alias("key"),
                    F.lit(None).cast("binary").alias("value"),
                )
                timed("read_back_narrow", functools.partial(check.summarize, narrow))
    finally:
        spark.stop()
        datagen.delete_topic(info.bootstrap_servers, dataset.topic)
    (log,) = events.iterdir()
    jobs = job_totals(log)
    summary: dict[str, dict[str, list[float]]] = {}
    for step in steps:
        acc = summary.setdefault(step["step"], {"seconds": [], "run_s": [], "cpu_s": [], "gc_s": []})
        acc["seconds"].append(step["seconds"])
        inside = [j for j in jobs.values() if step["start"] <= j["start"] / 1000 <= step["end"]]
        for key in ("run_s", "cpu_s", "gc_s"):
            acc[key].append(round(sum(j[key] for j in inside), 2))
    print(json.dumps({k: {m: median(v) for m, v in acc.items()} for k, acc in summary.items()}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
