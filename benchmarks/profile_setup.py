"""Where the time of one small spark-submit batch goes, step by step, beside a trivial spark-submit.

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.profile_setup [--records 10000] [--partitions 8] [--repeat 3]
        [--class-archive-dir DIR]

Runs the package's batch (plan, spark-submit of the app, commit; as the overhead section of
``run.py`` does) and the trivial spark-submit (``spark.range(10).count()``) alternately, both through
``timed_app.py``, which notes the Python driver's start, the JVM's start, the session, each step of
the app and the stop; Spark's event log adds each job and stage. Prints, per contender, the median
timeline in seconds since the worker started the batch, and the phases side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, loadavg, median, prepare_environment, say

TIMED_APP = Path(__file__).with_name("timed_app.py")
# (phase, from mark, to mark); a mark "first job start" / "last job end" is found in the event log
PHASES = [
    ("plan + attempt rows", "start", "submit_start"),
    ("spark-submit launcher to JVM start", "submit_start", "JVM started"),
    ("JVM start to Python driver start", "JVM started", "python driver started"),
    ("Python: import pyspark and the app", "python driver started", "getOrCreate start"),
    ("SparkContext start", "getOrCreate start", "SparkContext started (application start)"),
    ("SparkSession ready", "SparkContext started (application start)", "getOrCreate end (SparkSession ready)"),
    ("app: job file, checks, DataFrame", "getOrCreate end (SparkSession ready)", "action start"),
    ("action call to first job (planning, Kafka offsets)", "action start", "first job start"),
    ("Spark jobs (first start to last end)", "first job start", "last job end"),
    ("after the last job: check, size, report", "last job end", "spark.stop() start"),
    ("spark.stop()", "spark.stop() start", "spark.stop() end"),
    ("Python exit and JVM shutdown", "spark.stop() end", "submit_end"),
    ("commit", "submit_end", "committed"),
    ("total", "start", "end"),
]
ACTIONS = ("Parquet write start", "spark.range(10).count() start")


def timeline(result: dict[str, Any], marks_file: Path) -> dict[str, float]:
    """Every mark of one run (worker, timed app, event log) in seconds since the worker's start."""
    epochs: dict[str, float] = dict(result["epochs"])
    marks: list[tuple[str, float]] = [(name, at) for name, at in epochs.items()]
    marks += [(name, at) for name, at in json.loads(marks_file.read_text())["marks"]]
    marks += [(name, at) for name, at in result["spark"].get("events", [])]
    jobs = [at for name, at in marks if name.startswith("job ") and name.endswith(" start")]
    ends = [at for name, at in marks if name.startswith("job ") and name.endswith(" end")]
    marks += [("first job start", min(jobs)), ("last job end", max(ends))]
    marks += [("action start", at) for name, at in marks if name in ACTIONS]
    marks.append(("end", epochs.get("committed", epochs["submit_end"])))
    origin = epochs["start"]
    out: dict[str, float] = {}
    for name, at in marks:
        out.setdefault(name, at - origin)  # the first occurrence (the write of the errors comes later)
    return out


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    names = {name for run in runs for name in run}
    found = {name: median(run.get(name) for run in runs) for name in names}
    return dict(sorted(((k, v) for k, v in found.items() if v is not None), key=lambda kv: kv[1]))


def phase_rows(run: dict[str, float]) -> dict[str, float | None]:
    return {phase: (run[b] - run[a]) if a in run and b in run else None for phase, a, b in PHASES}


def render(results: dict[str, Any]) -> str:
    lines = [
        f"# One {results['records']:,}-record batch ({results['partitions']} partitions) against a trivial "
        f"spark-submit, median of {results['repeat']}",
        "",
        f"Load average before the runs {results['loadavg_before']}, after {results['loadavg_after']}.",
        "",
        "| phase | batch s | trivial s |",
        "| --- | ---: | ---: |",
    ]
    per = {name: [phase_rows(r) for r in results[name]["timelines"]] for name in ("package", "trivial")}
    for phase, _, _ in PHASES:
        batch = median(r[phase] for r in per["package"])
        trivial = median(r[phase] for r in per["trivial"])
        lines.append(f"| {phase} | {_s(batch)} | {_s(trivial)} |")
    cpu = [median(r.get("cpu_s") for r in results[name]["runs"]) for name in ("package", "trivial")]
    lines.append(f"| CPU seconds of the processes (user + system) | {_s(cpu[0])} | {_s(cpu[1])} |")
    for name in ("package", "trivial"):
        lines += ["", f"## Timeline: {name} (median seconds since the worker's start)", ""]
        lines += ["| at s | step |", "| ---: | --- |"]
        lines += [f"| {at:.2f} | {what} |" for what, at in medians(results[name]["timelines"]).items()]
    return "\n".join(lines) + "\n"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_setup", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--app", type=Path, help="another copy of kafka_range_batch.py to time (a baseline)")
    parser.add_argument(
        "--class-archive-dir", help="the package's spark_class_archive_dir (one uncounted batch writes the archive)"
    )
    parser.add_argument("--out", type=Path, help="write the runs as JSON here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "scripts"))
    import devstack
    from airflow_kafka_offsets.spark.settings import DEFAULT_SPARK_CONF
    from benchmarks import contenders, datagen
    from benchmarks.common import bench_ledger, drop_ledger

    info = devstack.up()
    prepare_environment(info)
    import airflow.providers.apache.spark.hooks.spark_submit  # noqa: F401 - loaded in a worker before a task

    if args.app:
        os.environ["AKO_TIMED_APP"] = str(args.app.resolve())
    extra = dict(kv.split("=", 1) for kv in args.spark_conf)
    workdir = Path(tempfile.mkdtemp(prefix="ako-profile-setup-"))
    data = datagen.produce(info.bootstrap_servers, args.records, args.partitions)
    ledger = bench_ledger(info)
    runners: dict[str, contenders.Runner] = {
        "package": contenders.PackageRunner(
            info, ledger, workdir, extra, app=str(TIMED_APP), class_archive_dir=args.class_archive_dir
        ),
        "trivial": contenders.TrivialSubmitRunner(info, workdir, {**DEFAULT_SPARK_CONF, **extra}, app=TIMED_APP),
    }
    results: dict[str, Any] = {
        "records": args.records,
        "partitions": args.partitions,
        "repeat": args.repeat,
        "spark_conf": extra,
        "class_archive_dir": args.class_archive_dir,
        "loadavg_before": loadavg(),
        **{name: {"runs": [], "timelines": []} for name in runners},
    }
    try:
        if args.class_archive_dir:  # the first batch writes the archive: not counted
            os.environ["AKO_TIMING_FILE"] = str(workdir / "marks-archive.json")
            runners["package"](data.topic, data.records)
        for rep in range(args.repeat):
            for name, runner in runners.items():
                marks_file = workdir / f"marks-{uuid.uuid4().hex[:8]}.json"
                os.environ["AKO_TIMING_FILE"] = str(marks_file)
                result = runner(data.topic, data.records)
                results[name]["runs"].append(result)
                results[name]["timelines"].append(timeline(result, marks_file))
                say(f"run {rep + 1}/{args.repeat}: {name}: {result['seconds']:.2f} s (load {loadavg()})")
    finally:
        drop_ledger(ledger)
        datagen.delete_topic(info.bootstrap_servers, data.topic)
    results["loadavg_after"] = loadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
