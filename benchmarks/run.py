"""The benchmark harness: throughput against the alternatives, per-batch overhead, Spark Connect, ledger scaling.

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.run [--quick] [--only throughput,...,avro]
        [--records N] [--partitions P] [--repeat R] [--label latest] [--compare before.json] [--update-readme]

(`scripts/bench` does the set-up and passes its arguments here.) Starts or reuses the local stack
(``AKO_STACK_DIR``; with its Spark Connect server for the connect section), prints a Markdown
summary and writes ``<out-dir>/<label>.json`` and ``.md``; with ``--update-readme`` also the
summary table of the top-level README.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shlex
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    CONNECT_CONN_ID,
    REPO,
    cpu_counters,
    dump_json,
    loadavg,
    machine_info,
    prepare_environment,
    say,
    stolen_share,
)
from benchmarks.sections import SECTION_RUNS, needs_connect, pg_version

if TYPE_CHECKING:  # imported where used: Airflow's settings are made first (prepare_environment)
    pass

DEFAULT_RESULTS = REPO / "benchmarks" / "results"
README = REPO / "README.md"
CONTENDERS = (
    "package",
    "package_baseline",
    "package_connect",
    "structured_streaming",
    "structured_streaming_connect",
    "python_consumer",
    "kafka_consumer_perf",
)
SECTIONS = ("throughput", "overhead", "connect", "plan", "scheduler", "pipelines", "scaling", "avro", "catch_up")
# avro (decoded against raw, benchmarks/avro_decode.py) and catch_up (a 10M backlog, benchmarks/catch_up.py)
# when asked for
DEFAULT_SECTIONS = SECTIONS[:-2]


def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks.run", description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (100,000 records, 1 run, scaling to 1,000 partitions / 10,000 batches)",
    )
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_SECTIONS),
        help=f"comma list of {', '.join(SECTIONS)} (default: all but avro and catch_up)",
    )
    p.add_argument("--records", type=int, help="throughput data set size (default 2,000,000; quick 100,000)")
    p.add_argument("--partitions", type=int, default=8, help="partitions of the throughput topic (default 8)")
    p.add_argument("--record-bytes", type=int, default=500, help="approximate key + value size (default 500)")
    p.add_argument("--repeat", type=int, help="runs per contender, medians reported (default 3; quick 1)")
    p.add_argument(
        "--warmup",
        type=int,
        help="untimed runs of every contender before the timed ones (default 1; quick 0): a Connect "
        "server's first Kafka read and Parquet write, the page cache, the JIT",
    )
    p.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma list of {', '.join(CONTENDERS)}")
    p.add_argument("--overhead-records", type=int, default=10_000, help="size of the small batch (default 10,000)")
    p.add_argument("--overhead-repeat", type=int, help="small batches timed (default 3; quick 2)")
    p.add_argument("--connect-records", type=int, help="records of a Spark Connect batch (default: --overhead-records)")
    p.add_argument("--connect-batches", type=int, help="Spark Connect batches timed (default 5; quick 2)")
    p.add_argument("--plan-rounds", type=int, help="timed plan tasks of each case (default 5; quick 2)")
    p.add_argument("--scheduler-records", type=int, default=10_000, help="records a scheduler-section run reads")
    p.add_argument("--scheduler-rounds", type=int, help="runs of each scheduler-section DAG (default 5; quick 2)")
    p.add_argument(
        "--scheduler-spark-conn",
        default=CONNECT_CONN_ID,
        help=f"the Spark connection of the scheduler section's batches (default {CONNECT_CONN_ID})",
    )
    p.add_argument("--pipelines", type=int, help="pipelines batched at once in the pipelines section (default 20)")
    p.add_argument("--pipeline-records", type=int, default=10_000, help="records a pipeline reads (default 10,000)")
    p.add_argument("--catch-up-records", type=int, help="the catch_up section's backlog (default 10,000,000)")
    p.add_argument("--catch-up-cap", type=int, help="its max_records_per_batch (default 2,000,000)")
    p.add_argument("--driver-memory", default="1g", help="its spark-submit driver memory (default 1g)")
    p.add_argument("--scaling-partitions", type=_ints, help="default 10,100,1000,10000 (quick 10,100,1000)")
    p.add_argument("--scaling-history", type=_ints, help="default 10,10000,1000000 (quick 10,10000)")
    p.add_argument(
        "--history-partitions",
        type=int,
        default=1,
        help="partitions per batch in the history and the timed batches (default 1: a million batches"
        " of 8 partitions take several minutes to load)",
    )
    p.add_argument("--scaling-batches", type=int, help="batches timed per scaling point (default 5; quick 3)")
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for both Spark contenders (repeatable; for experiments)",
    )
    p.add_argument("--min-partitions", type=int, help="min_partitions for the package's batch (experiments)")
    p.add_argument(
        "--class-archive-dir",
        help="the package's spark_class_archive_dir for its spark-submit batches; without an archive there "
        "yet, the first one writes it and is slower (profile_setup --class-archive-dir writes one uncounted)",
    )
    p.add_argument(
        "--baseline-app",
        type=Path,
        metavar="FILE",
        help="a copy of an earlier spark_apps/kafka_range_batch.py: adds the contender package_baseline, "
        "the package's batch with that app (interleaved with the current one, also in overhead)",
    )
    p.add_argument(
        "--baseline-conf",
        metavar="JSON",
        help="DEFAULT_SPARK_CONF for package_baseline, as a JSON object (default: the current one)",
    )
    p.add_argument("--label", default="latest", help="results file name (default latest)")
    p.add_argument("--out-dir", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--compare", type=Path, help="an earlier results JSON to show before/after against")
    p.add_argument(
        "--update-readme",
        type=Path,
        nargs="?",
        const=README,
        metavar="FILE",
        help="rewrite the summary table between the benchmark markers of the README (default README.md)",
    )
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown section(s) {', '.join(sorted(unknown))}")
    args.contender_list = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if set(args.contender_list) - set(CONTENDERS):
        p.error(f"unknown contender(s) in {args.contenders}")
    args.baseline_conf = json.loads(args.baseline_conf) if args.baseline_conf else None
    args.baseline = bool(args.baseline_app or args.baseline_conf is not None)
    if args.baseline_app and not args.baseline_app.is_file():
        p.error(f"--baseline-app {args.baseline_app} is not a file")
    if not args.baseline:
        args.contender_list = [c for c in args.contender_list if c != "package_baseline"]
    elif "package_baseline" not in args.contender_list and "package" in args.contender_list:
        args.contender_list.insert(args.contender_list.index("package") + 1, "package_baseline")
    q = args.quick
    args.records = args.records or (100_000 if q else 2_000_000)
    args.repeat = args.repeat or (1 if q else 3)
    args.warmup = args.warmup if args.warmup is not None else (0 if q else 1)
    args.overhead_repeat = args.overhead_repeat or (2 if q else 3)
    args.connect_records = args.connect_records or args.overhead_records
    args.connect_batches = args.connect_batches or (2 if q else 5)
    args.plan_rounds = args.plan_rounds or (2 if q else 5)
    args.scheduler_rounds = args.scheduler_rounds or (2 if q else 5)
    args.pipelines = args.pipelines or (3 if q else 20)
    args.catch_up_records = args.catch_up_records or 10_000_000
    args.catch_up_cap = args.catch_up_cap or 2_000_000
    args.scaling_partitions = args.scaling_partitions or ([10, 100, 1000] if q else [10, 100, 1000, 10_000])
    args.scaling_history = args.scaling_history or ([10, 10_000] if q else [10, 10_000, 1_000_000])
    args.scaling_batches = args.scaling_batches or (3 if q else 5)
    args.extra_conf = dict(kv.split("=", 1) for kv in args.spark_conf)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import devstack

    info = devstack.up(spark_connect_server=needs_connect(args))
    prepare_environment(info)
    if {"throughput", "overhead"} & set(args.sections):
        # Import Airflow and the Spark provider now: a worker has them loaded before a task starts, so their
        # import time is no part of any figure.
        import airflow.providers.apache.spark.hooks.spark_submit  # noqa: F401
    for name in ("airflow_kafka_offsets", "airflow.task.hooks", "airflow.task", "airflow"):
        logging.getLogger(name).setLevel(logging.WARNING)

    from benchmarks.report import goals, render, update_readme

    command = "benchmarks/run.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    results: dict[str, Any] = {
        "format": 1,
        "label": args.label,
        "command": command.strip(),
        "started_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "params": {
            "records": args.records,
            "partitions": args.partitions,
            "record_bytes": args.record_bytes,
            "repeat": args.repeat,
            "sections": args.sections,
            "contenders": args.contender_list,
            "overhead_records": args.overhead_records,
            "overhead_repeat": args.overhead_repeat,
            "connect_records": args.connect_records,
            "connect_batches": args.connect_batches,
            "plan_rounds": args.plan_rounds,
            "scheduler_records": args.scheduler_records,
            "scheduler_rounds": args.scheduler_rounds,
            "scheduler_spark_conn": args.scheduler_spark_conn,
            "pipelines": args.pipelines,
            "pipeline_records": args.pipeline_records,
            "scaling_partitions": args.scaling_partitions,
            "scaling_history": args.scaling_history,
            "history_partitions": args.history_partitions,
            "scaling_batches": args.scaling_batches,
            "extra_spark_conf": args.extra_conf,
            "min_partitions": args.min_partitions,
            "class_archive_dir": args.class_archive_dir,
            "quick": args.quick,
            "baseline_app": str(args.baseline_app) if args.baseline_app else None,
            "baseline_conf": args.baseline_conf,
            "catch_up_records": args.catch_up_records,
            "catch_up_cap": args.catch_up_cap,
            "driver_memory": args.driver_memory,
        },
        "machine": machine_info(info, pg_version(info)),
    }
    workdir = Path(tempfile.mkdtemp(prefix="ako-bench-"))
    started = time.time()
    try:
        for section in (s for s in SECTIONS if s in args.sections):
            say(f"--- {section}")
            results[section] = SECTION_RUNS[section](info, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["finished_at"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    results["elapsed_s"] = round(time.time() - started, 1)
    results["loadavg_at_end"] = loadavg()
    results["cpu_stolen_share"] = stolen_share(results["machine"].get("cpu_counters_at_start", []), cpu_counters())
    results["goals"] = goals(results)
    before = json.loads(args.compare.read_text()) if args.compare else None
    markdown = render(results, before, args.compare.name if args.compare else "")
    dump_json(args.out_dir / f"{args.label}.json", results)
    (args.out_dir / f"{args.label}.md").write_text(markdown)
    print(markdown)
    say(f"wrote {args.out_dir / (args.label + '.json')} and .md in {results['elapsed_s']:.0f}s")
    if args.update_readme:
        relative = args.out_dir / f"{args.label}.md"
        with contextlib.suppress(ValueError):
            relative = relative.resolve().relative_to(REPO)
        update_readme(args.update_readme, results, str(relative))
        say(f"updated the benchmark summary in {args.update_readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
