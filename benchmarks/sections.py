"""The sections of a benchmark run (run.py): each measures one thing and returns its figures as JSON."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import CONNECT_CONN_ID, MB, bench_ledger, drop_ledger, loadavg, median, say, spread

if TYPE_CHECKING:  # imported where used: Airflow's settings are made first (prepare_environment)
    from airflow_kafka_offsets.ledger import Ledger
    from benchmarks.contenders import PackageRunner


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


def needs_connect(args: argparse.Namespace) -> bool:
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
    ledger = bench_ledger(info)
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
        drop_ledger(ledger)
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
    ledger = bench_ledger(info)
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
        drop_ledger(ledger)
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

    ledger = bench_ledger(info)
    try:
        one_batch(info, ledger, CONNECT_CONN_ID, args.connect_records, str(workdir))
        runs = measure(info, ledger, CONNECT_CONN_ID, args.connect_records, args.connect_batches, str(workdir))
    finally:
        drop_ledger(ledger)
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


def pg_version(info: Any) -> str | None:
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


# What each section of a run measures, by name (run.py's --only).
SECTION_RUNS: dict[str, Callable[[Any, argparse.Namespace, Path], dict[str, Any]]] = {
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
