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
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    CONNECT_CONN_ID,
    MB,
    REPO,
    cpu_counters,
    dump_json,
    loadavg,
    machine_info,
    median,
    prepare_environment,
    say,
    spread,
    stolen_share,
)

if TYPE_CHECKING:  # imported where used: Airflow's settings are made first (prepare_environment)
    from airflow_kafka_offsets.ledger import Ledger
    from benchmarks.contenders import PackageRunner

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


# --------------------------------------------------------------------------- sections


def _ledger(info: Any) -> Ledger:
    import psycopg2

    from airflow_kafka_offsets.ledger import Ledger

    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=f"bench_{uuid.uuid4().hex[:10]}")
    ledger.migrate()
    return ledger


def _drop(ledger: Any) -> None:
    with ledger.transaction() as tx:
        tx.execute("DROP SCHEMA {s} CASCADE")


def _spark_split_median(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = ["plan_s", "attempt_bookkeeping_s", "startup_s", "setup_s", "jobs_s", "shutdown_s", "commit_s"]
    rows = []
    for r in runs:
        row = {**r.get("phases", {}), **{k: v for k, v in r.get("spark", {}).items() if isinstance(v, (int, float))}}
        row["total_s"] = r["seconds"]
        rows.append(row)
    return {
        k: round(median(row.get(k) for row in rows) or 0.0, 3)  # not None: some row has k
        for k in [*keys, "total_s"]
        if any(row.get(k) is not None for row in rows)
    }


def _baseline_runner(info: Any, ledger: Ledger, workdir: Path, args: argparse.Namespace) -> PackageRunner | None:
    from benchmarks import contenders

    if not args.baseline:
        return None
    return contenders.PackageRunner(
        info,
        ledger,
        workdir,
        args.extra_conf,
        args.min_partitions,
        app=str(args.baseline_app.resolve()) if args.baseline_app else None,
        default_conf=args.baseline_conf,
    )


def rate_figures(records: int, payload_bytes: int, seconds: float, cpu_s: float | None, cores: int) -> dict[str, Any]:
    """records/s and MB/s, per core of the machine (every contender may use them all), and per CPU second used."""
    rate, mb_rate = records / seconds, payload_bytes / MB / seconds
    return {
        "records_per_s": round(rate, 1),
        "mb_per_s": round(mb_rate, 2),
        "records_per_s_per_core": round(rate / cores, 1),
        "mb_per_s_per_core": round(mb_rate / cores, 2),
        "records_per_cpu_s": round(records / cpu_s, 1) if cpu_s else None,
    }


def _needs_connect(args: argparse.Namespace) -> bool:
    on_connect = {"package_connect", "structured_streaming_connect"} & set(args.contender_list)
    if {"scheduler", "pipelines"} & set(args.sections) and args.scheduler_spark_conn == CONNECT_CONN_ID:
        return True
    return bool({"connect", "plan", "avro"} & set(args.sections)) or (
        "throughput" in args.sections and bool(on_connect)
    )


def _connect_pid(args: argparse.Namespace) -> int | None:
    """The stack's Spark Connect server, when a contender runs on it."""
    if not {"package_connect", "structured_streaming_connect"} & set(args.contender_list):
        return None
    import devstack

    return int(devstack.status()["services"]["spark_connect"]["pid"])


# Same-mode pairs whose ratio is also given per round (the package's runs beside its contenders' in the
# same round, minutes apart at most), so a lead can be told from the machine's noise.
SAME_MODE_PAIRS = [
    ("package_connect", "structured_streaming_connect"),
    ("package_connect", "python_consumer"),
    ("package", "structured_streaming"),
]


def round_ratios(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Per round, the package's records/s over its same-mode contender's (their seconds inverted)."""
    return {
        f"{package}_vs_{other}": [round(o["seconds"] / p["seconds"], 3) for p, o in zip(runs[package], runs[other])]
        for package, other in SAME_MODE_PAIRS
        if runs.get(package) and runs.get(other)
    }


def throughput(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from airflow_kafka_offsets.spark.settings import DEFAULT_SPARK_CONF
    from benchmarks import contenders, datagen

    dataset = datagen.produce(info.bootstrap_servers, args.records, args.partitions, args.record_bytes)
    ledger = _ledger(info)
    spark_conf = {**DEFAULT_SPARK_CONF, **args.extra_conf}
    runners: dict[str, contenders.Runner | None] = {
        "package": contenders.PackageRunner(
            info, ledger, workdir, args.extra_conf, args.min_partitions, class_archive_dir=args.class_archive_dir
        ),
        "package_baseline": _baseline_runner(info, ledger, workdir, args),
        "package_connect": contenders.PackageRunner(
            info, ledger, workdir, args.extra_conf, args.min_partitions, connect_server_pid=_connect_pid(args)
        ),
        "structured_streaming": contenders.StreamingRunner(info, workdir, spark_conf),
        "structured_streaming_connect": contenders.StreamingConnectRunner(
            info, workdir, args.extra_conf, _connect_pid(args)
        ),
        "python_consumer": contenders.PythonConsumerRunner(info, workdir),
        "kafka_consumer_perf": contenders.ConsumerPerfRunner(info),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.contender_list}
    try:
        for rep in range(args.warmup):
            for name in args.contender_list:
                runner = runners[name]
                assert runner is not None, name
                result = runner(dataset.topic, dataset.records)
                say(f"throughput warm-up {rep + 1}/{args.warmup}: {name}: {result['seconds']:.1f}s (not counted)")
        for rep in range(args.repeat):  # round robin, so a noisy minute hurts every contender alike
            for name in args.contender_list:
                runner = runners[name]
                assert runner is not None, name  # package_baseline is listed only with a baseline
                load = loadavg()
                result = runner(dataset.topic, dataset.records)
                result["loadavg_before"] = load
                runs[name].append(result)
                say(
                    f"throughput run {rep + 1}/{args.repeat}: {name}: {result['seconds']:.1f}s "
                    f"({dataset.records / result['seconds']:,.0f} records/s)"
                )
    finally:
        _drop(ledger)
        datagen.delete_topic(info.bootstrap_servers, dataset.topic)
    cores = os.cpu_count() or 1
    out: dict[str, Any] = {
        "dataset": dataset.to_json(),
        "repeat": args.repeat,
        "warmup": args.warmup,
        "cores": cores,
        "contenders": {},
        "round_ratios": round_ratios(runs),
    }
    base = None
    for name in args.contender_list:
        seconds = spread([r["seconds"] for r in runs[name]])
        cpu = median(r.get("cpu_s") for r in runs[name])
        assert seconds["median"] is not None  # every run has its seconds
        entry = {
            "seconds": seconds,
            **rate_figures(dataset.records, dataset.payload_bytes, seconds["median"], cpu, cores),
            "runs": runs[name],
        }
        rate = entry["records_per_s"]
        if name.startswith("package"):
            entry["median_split"] = _spark_split_median(runs[name])
        if name == "package":
            base = rate
        out["contenders"][name] = entry
    if base:
        for entry in out["contenders"].values():
            entry["vs_package"] = round(entry["records_per_s"] / base, 3)
    return out


def overhead(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from airflow_kafka_offsets.spark.settings import DEFAULT_SPARK_CONF
    from benchmarks import contenders, datagen

    dataset = datagen.produce(info.bootstrap_servers, args.overhead_records, args.partitions, args.record_bytes)
    ledger = _ledger(info)
    runners: dict[str, contenders.Runner] = {
        "package": contenders.PackageRunner(
            info, ledger, workdir, args.extra_conf, args.min_partitions, class_archive_dir=args.class_archive_dir
        ),
        "trivial_submit": contenders.TrivialSubmitRunner(info, workdir, {**DEFAULT_SPARK_CONF, **args.extra_conf}),
    }
    baseline = _baseline_runner(info, ledger, workdir, args)
    if baseline is not None:  # with args.baseline
        runners["package_baseline"] = baseline
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in runners}
    try:
        for rep in range(args.overhead_repeat):
            for name, runner in runners.items():
                load = loadavg()
                result = runner(dataset.topic, dataset.records)
                result["loadavg_before"] = load
                runs[name].append(result)
                say(f"overhead run {rep + 1}/{args.overhead_repeat}: {name}: {result['seconds']:.1f}s")
    finally:
        _drop(ledger)
        datagen.delete_topic(info.bootstrap_servers, dataset.topic)
    out = {
        "records": dataset.records,
        "partitions": dataset.partitions,
        "repeat": args.overhead_repeat,
        "median": _spark_split_median(runs["package"]),
        "runs": runs["package"],
        "trivial_submit": {
            "seconds": spread([r["seconds"] for r in runs["trivial_submit"]]),
            "runs": runs["trivial_submit"],
        },
    }
    out["vs_trivial_submit"] = round(out["median"]["total_s"] / out["trivial_submit"]["seconds"]["median"], 2)
    if args.baseline:
        out["baseline"] = {"median": _spark_split_median(runs["package_baseline"]), "runs": runs["package_baseline"]}
    return out


def connect(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One small batch plan to commit on the warm Spark Connect server (warmed by one uncounted batch)."""
    from benchmarks.connect_latency import PARTITIONS, measure, one_batch

    ledger = _ledger(info)
    try:
        one_batch(info, ledger, CONNECT_CONN_ID, args.connect_records, str(workdir))
        runs = measure(info, ledger, CONNECT_CONN_ID, args.connect_records, args.connect_batches, str(workdir))
    finally:
        _drop(ledger)
    return {
        "records": args.connect_records,
        "partitions": PARTITIONS,
        "repeat": args.connect_batches,
        "median": {
            k: round(median(r.get(k) for r in runs) or 0.0, 3)
            for k in ("plan_s", "read_s", "commit_s", "total_s", "trivial_s")
        },
        "seconds": spread([r["total_s"] for r in runs]),
        "runs": runs,
    }


def plan(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The plan task's own time, each plan in a new process (benchmarks/plan_task.py)."""
    from benchmarks.plan_task import measure

    return measure(info.bootstrap_servers, workdir, args.partitions, args.plan_rounds, records=1000)


def scheduler(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A one-task batch against an empty DAG, both run by the stack's real scheduler."""
    import devstack
    from benchmarks.scheduler_latency import measure

    cfg = devstack.start_airflow()
    return measure(info, cfg, args.scheduler_spark_conn, args.scheduler_records, args.scheduler_rounds, workdir)


def pipelines(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Many pipelines' one-task batches at once on one server and one ledger, under the real scheduler."""
    import devstack
    from benchmarks.scheduler_latency import measure_many

    cfg = devstack.start_airflow()
    return measure_many(info, cfg, args.scheduler_spark_conn, args.pipelines, args.pipeline_records, workdir)


def scaling(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from benchmarks.scaling import run_scaling

    return run_scaling(
        info, args.scaling_partitions, args.scaling_history, args.history_partitions, args.scaling_batches
    )


# --------------------------------------------------------------------------- main


def _pg_version(info: Any) -> str | None:
    import psycopg2

    try:
        conn = psycopg2.connect(info.pg_dsn())
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW server_version")
                return f"PostgreSQL {cur.fetchone()[0].split()[0]}"
        finally:
            conn.close()
    except Exception:
        return None


def catch_up(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A backlog drained by the catch-up operation in capped spark-submit batches, the driver's memory bounded."""
    from benchmarks.catch_up import measure

    return measure(info, args.catch_up_records, args.catch_up_cap, args.driver_memory)


def avro(info: Any, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The same batch raw and decoded from Avro on the warm Spark Connect server (``--records`` records)."""
    from benchmarks import avro_decode

    result = avro_decode.measure(info, args.records, args.partitions, args.record_bytes, args.repeat)
    say(avro_decode.summary_line(result))
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import devstack

    info = devstack.up(spark_connect_server=_needs_connect(args))
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
        "machine": machine_info(info, _pg_version(info)),
    }
    workdir = Path(tempfile.mkdtemp(prefix="ako-bench-"))
    started = time.time()
    try:
        runs = {
            "throughput": throughput,
            "overhead": overhead,
            "connect": connect,
            "plan": plan,
            "scheduler": scheduler,
            "pipelines": pipelines,
            "scaling": scaling,
            "avro": avro,
            "catch_up": catch_up,
        }
        for section in (s for s in SECTIONS if s in args.sections):
            say(f"--- {section}")
            results[section] = runs[section](info, args, workdir)
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
