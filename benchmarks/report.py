"""Render a results JSON (see run.py) as Markdown, optionally side by side with an earlier run."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LABELS = {
    "package": "airflow-kafka-offsets batch (plan + spark-submit + commit)",
    "package_baseline": "airflow-kafka-offsets batch, baseline (app + Spark conf before tuning)",
    "package_connect": "airflow-kafka-offsets batch on a warm Spark Connect server (plan + read + commit)",
    "structured_streaming": "Spark Structured Streaming, AvailableNow + checkpoint",
    "structured_streaming_connect": (
        "Spark Structured Streaming, AvailableNow + checkpoint, on the same warm Spark Connect server"
    ),
    "python_consumer": "Python consumer (confluent-kafka + pyarrow)",
    "kafka_consumer_perf": "Kafka ConsumerPerformance (reads only: the ceiling)",
}


# The package's speed goals: (key, what, target as (bound, "max"|"min") or None)
GOALS: list[tuple[str, str, tuple[float, str] | None]] = [
    (
        "package_connect_vs_structured_streaming_connect",
        "throughput, same mode (both on the warm Spark Connect server): package ÷ Structured Streaming "
        "(AvailableNow), records/s",
        (1.5, "min"),
    ),
    (
        "package_connect_vs_python_consumer",
        "throughput on the warm Spark Connect server: package ÷ the hand-written Python consumer, records/s",
        (1.5, "min"),
    ),
    (
        "package_vs_structured_streaming",
        "throughput, same mode (both spark-submit): package ÷ Structured Streaming (AvailableNow), records/s",
        (1.2, "min"),
    ),
    (
        "package_vs_python_consumer",
        "throughput, spark-submit: package ÷ the hand-written Python consumer, records/s",
        None,
    ),
    (
        "package_connect_vs_structured_streaming",
        "cross-mode (package on a warm Connect server, AvailableNow by spark-submit with its JVM start): "
        "package ÷ Structured Streaming, records/s",
        None,
    ),
    ("batch_vs_trivial_submit", "small batch (spark-submit) ÷ a trivial spark-submit, wall seconds", (1.2, "max")),
    ("trivial_submit_s", "trivial spark-submit (`spark.range(10).count()`), seconds", None),
    ("connect_batch_s", "small batch on a warm Spark Connect server, plan to commit, seconds", (1.5, "max")),
    (
        "one_task_over_empty_s",
        "under the real scheduler: a one-task batch of 10,000 records from run start to commit, minus an empty "
        "one-task DAG's run, seconds",
        (1.5, "max"),
    ),
    (
        "pipelines_vs_one",
        "under the real scheduler: many pipelines batched at once on one Connect server and ledger, aggregate "
        "records/s ÷ one pipeline alone",
        None,
    ),
    (
        "pipelines_slowest_vs_alone",
        "under the real scheduler: the slowest of the pipelines' batches ÷ one batch alone, run start to commit",
        (2.0, "max"),
    ),
    (
        "plan_task_new_ms",
        "the plan task's own time (execute in a new process), a new pipeline of 8 partitions, slowest Spark "
        "connection, milliseconds",
        (200.0, "max"),
    ),
    (
        "plan_task_steady_ms",
        "the plan task's own time, a pipeline with committed batches, slowest Spark connection, milliseconds",
        (200.0, "max"),
    ),
    ("ledger_1000_ms", "ledger: plan + commit of a batch of 1,000 partitions, milliseconds", (100.0, "max")),
    ("ledger_10000_ms", "ledger: plan + commit of a batch of 10,000 partitions, milliseconds", (1000.0, "max")),
]
README_START = "<!-- benchmarks:summary:start -->"
README_END = "<!-- benchmarks:summary:end -->"


def goals(results: dict[str, Any]) -> dict[str, float | None]:
    """The ratios and figures of :data:`GOALS` from one results file (None: its section did not run)."""
    tp = (results.get("throughput") or {}).get("contenders", {})
    ov = results.get("overhead") or {}
    cn = results.get("connect") or {}

    def rate_ratio(other: str, package: str = "package") -> float | None:
        if package not in tp or other not in tp:
            return None
        ratio: float = round(tp[package]["records_per_s"] / tp[other]["records_per_s"], 3)
        return ratio

    trivial = (ov.get("trivial_submit") or {}).get("seconds", {}).get("median")
    ledger_ms = {r["partitions"]: r["plan_commit_ms"] for r in (results.get("scaling") or {}).get("partitions", [])}
    plan_ms = (results.get("plan") or {}).get("median_ms") or {}
    pl = results.get("pipelines") or {}

    def slowest_plan(case: str) -> float | None:
        return max((cases[case] for cases in plan_ms.values()), default=None)

    return {
        "package_vs_structured_streaming": rate_ratio("structured_streaming"),
        "package_vs_python_consumer": rate_ratio("python_consumer"),
        "package_connect_vs_structured_streaming": rate_ratio("structured_streaming", "package_connect"),
        "package_connect_vs_structured_streaming_connect": rate_ratio(
            "structured_streaming_connect", "package_connect"
        ),
        "package_connect_vs_python_consumer": rate_ratio("python_consumer", "package_connect"),
        "batch_vs_trivial_submit": ov.get("vs_trivial_submit"),
        "trivial_submit_s": round(trivial, 3) if trivial is not None else None,
        "connect_batch_s": (cn.get("median") or {}).get("total_s"),
        "one_task_over_empty_s": (results.get("scheduler") or {}).get("over_empty_s"),
        "pipelines_vs_one": _ratio(pl.get("together_records_per_s"), pl.get("alone_records_per_s")),
        "pipelines_slowest_vs_alone": pl.get("slowest_vs_alone"),
        "plan_task_new_ms": slowest_plan("new"),
        "plan_task_steady_ms": slowest_plan("steady"),
        "ledger_1000_ms": ledger_ms.get(1000),
        "ledger_10000_ms": ledger_ms.get(10000),
    }


def _goal_value(key: str, value: float) -> str:
    if key.endswith("_ms"):
        return f"{value:,.0f} ms"
    return f"{value:.2f}{'x' if '_vs_' in key else ' s'}"


def _target(target: tuple[float, str] | None, value: float | None) -> tuple[str, str]:
    if target is None:
        return "-", "-"
    bound, kind = target
    text = f"{'≤' if kind == 'max' else '≥'} {bound:g}"
    if value is None:
        return text, "-"
    met = value <= bound if kind == "max" else value >= bound
    return text, "yes" if met else "no"


def goal_lines(results: dict[str, Any]) -> list[str]:
    found = results.get("goals") or goals(results)
    rows = []
    for key, what, target in GOALS:
        value = found.get(key)
        if value is None:
            continue
        text, met = _target(target, value)
        rows.append([what, _goal_value(key, value), text, met])
    if not rows:
        return []
    return ["## Summary", "", *_table(["figure", "value", "target", "met"], rows), ""]


def median_of(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mid = len(present) // 2
    return present[mid] if len(present) % 2 else (present[mid - 1] + present[mid]) / 2


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        if abs(value) >= 1000 and digits <= 1:
            return f"{value:,.0f}"
        return f"{value:,.{digits}f}"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(headers) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows
    ]


def machine_lines(results: dict[str, Any]) -> list[str]:
    m = results.get("machine", {})
    return [
        f"- machine: {m.get('cpu_cores')} cores ({m.get('cpu_model')}), {m.get('memory_gib')} GiB, {m.get('os')}",
        f"- versions: Python {m.get('python')}, {m.get('java')}, pyspark {m.get('pyspark')}, "
        f"Kafka broker {m.get('kafka_broker')}, {m.get('postgresql')}, confluent-kafka {m.get('confluent_kafka')}, "
        f"pyarrow {m.get('pyarrow')}, airflow-kafka-offsets {m.get('airflow_kafka_offsets')} "
        f"(git {m.get('git_commit')})",
        f"- load average (1, 5, 15 min) at start {m.get('loadavg_at_start')}, at end {results.get('loadavg_at_end')}",
        *stolen_lines(results),
    ]


def stolen_lines(results: dict[str, Any]) -> list[str]:
    share = results.get("cpu_stolen_share")
    if share is None:
        return []
    return [
        f"- CPU time stolen by the hypervisor during the run (`/proc/stat`): {share:.0%} of the machine's CPU time; "
        "the load average does not show it, and every wall-clock figure stretches with it"
    ]


def throughput_lines(results: dict[str, Any]) -> list[str]:
    tp = results.get("throughput")
    if not tp:
        return []
    ds = tp["dataset"]
    out = [
        "## Throughput",
        "",
        f"{ds['records']:,} JSON records, {ds['payload_bytes'] / 1e6:,.0f} MB of key + value "
        f"(~{ds['payload_bytes'] / max(ds['records'], 1):.0f} B each), {ds['partitions']} partitions; "
        f"wall clock from process start to exit, median of {tp['repeat']} run(s) (min-max); "
        "MB = 10^6 bytes of key + value.",
        "",
    ]
    rows = []
    for name, c in tp["contenders"].items():
        s = c["seconds"]
        cpu = median_of(r.get("cpu_s") for r in c.get("runs", []))
        rows.append(
            [
                LABELS.get(name, name),
                f"{_f(s['median'])} ({_f(s['min'])}-{_f(s['max'])})",
                _f(c["records_per_s"], 0),
                _f(c["mb_per_s"]),
                _f(c.get("records_per_s_per_core"), 0),
                _f(c.get("mb_per_s_per_core"), 2),
                f"{c['vs_package']:.2f}x" if c.get("vs_package") else "-",
                _f(cpu),
                _f(c.get("records_per_cpu_s"), 0),
            ]
        )
    headers = ["contender", "seconds", "records/s", "MB/s", "records/s per core", "MB/s per core", "vs package"]
    out += _table([*headers, "CPU s", "records per CPU s"], rows)
    out += [
        "",
        f"Per core: divided by the machine's {tp.get('cores', '?')} cores (every contender may use them all). "
        "CPU s: user + system CPU seconds of the contender's processes (spark-submit's JVMs and Python, "
        "the consumer), median; records per CPU s: records over those CPU seconds. The machine is shared "
        "with other work.",
    ]
    if tp.get("warmup"):
        out += ["", f"Every contender ran {tp['warmup']} untimed time(s) first (warm-up), then the timed runs in turn."]
    for pair, ratios in (tp.get("round_ratios") or {}).items():
        package, other = pair.split("_vs_")
        out += [
            "",
            f"{LABELS.get(package, package)} ÷ {LABELS.get(other, other)}, records/s, round by round: "
            + ", ".join(f"{r:.2f}x" for r in ratios)
            + (f" (median {median_of(ratios):.2f}x, {min(ratios):.2f}-{max(ratios):.2f}x)" if ratios else ""),
        ]
    perf = tp["contenders"].get("kafka_consumer_perf", {})
    tool = (perf.get("runs") or [{}])[0].get("tool_reported") if perf else None
    if tool:
        out += [
            "",
            f"ConsumerPerformance's own figure (fetch phase only, no JVM start-up or group join): "
            f"{_f(tool.get('fetch.nMsg.sec'), 0)} records/s, {_f(tool.get('fetch.MB.sec'))} MiB/s.",
        ]
    for name in ("package", "package_baseline"):
        split = tp["contenders"].get(name, {}).get("median_split")
        if split:
            what = "the package's" if name == "package" else "the baseline's"
            out += [
                "",
                f"Where {what} time goes (medians, seconds): "
                + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {_f(v)}" for k, v in split.items()),
            ]
    return [*out, ""]


OVERHEAD_PHASES = [
    ("plan_s", "plan (Kafka offsets + ledger plan)"),
    ("attempt_bookkeeping_s", "attempt rows + report check"),
    ("startup_s", "spark-submit start-up (JVMs, Python, SparkContext)"),
    ("setup_s", "Spark set-up (session, checks, Kafka source)"),
    ("jobs_s", "Spark jobs (read + write Parquet + report)"),
    ("shutdown_s", "Spark shutdown (report file, stop, JVM exit)"),
    ("commit_s", "commit (publish + ledger transaction)"),
    ("total_s", "total"),
]


def overhead_lines(results: dict[str, Any]) -> list[str]:
    ov = results.get("overhead")
    if not ov:
        return []
    out = [
        "## Overhead of one batch",
        "",
        f"One batch of {ov['records']:,} records ({ov['partitions']} partitions), median of {ov['repeat']} run(s), "
        "seconds; the Spark phases come from Spark's event log.",
        "",
    ]
    trivial = ov.get("trivial_submit")
    if trivial:
        sec = trivial["seconds"]
        archive = results.get("params", {}).get("class_archive_dir")
        settings = (
            "same jars and Spark settings, but no class archive: the package's batch maps the one in "
            f"`spark_class_archive_dir` {archive}"
            if archive
            else "same jars and Spark settings"
        )
        out += [
            f"A trivial spark-submit (`spark.range(10).count()`, {settings}), timed alternately: "
            f"{_f(sec['median'], 2)} s ({_f(sec['min'], 2)}-{_f(sec['max'], 2)}); the batch takes "
            f"{_f(ov['vs_trivial_submit'], 2)}x that.",
            "",
        ]
    base = (ov.get("baseline") or {}).get("median")
    if base:
        rows = [
            [label, _f(ov["median"].get(key), 2), _f(base.get(key), 2)]
            for key, label in OVERHEAD_PHASES
            if key in ov["median"]
        ]
        return out + _table(["phase", "seconds", "baseline seconds (before tuning)"], rows) + [""]
    rows = [[label, _f(ov["median"].get(key), 2)] for key, label in OVERHEAD_PHASES if key in ov["median"]]
    return out + _table(["phase", "seconds"], rows) + [""]


def connect_lines(results: dict[str, Any]) -> list[str]:
    cn = results.get("connect")
    if not cn:
        return []
    sec, med = cn["seconds"], cn["median"]
    return [
        "## Spark Connect: one small batch on a warm server",
        "",
        f"{cn['records']:,} records ({cn['partitions']} partitions) per batch, a fresh topic each, through "
        f"plan_batch, run_batch and commit_batch with the `spark_connect` connection, after one uncounted batch; "
        f"median of {cn['repeat']}, seconds.",
        "",
        *_table(
            ["plan", "read (the app on the server)", "commit", "plan to commit (min-max)"],
            [
                [
                    _f(med["plan_s"], 2),
                    _f(med["read_s"], 2),
                    _f(med["commit_s"], 2),
                    f"{_f(med['total_s'], 2)} ({_f(sec['min'], 2)}-{_f(sec['max'], 2)})",
                ]
            ],
            "rrrr",
        ),
        "",
        *_connect_floor(med),
    ]


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def pipelines_lines(results: dict[str, Any]) -> list[str]:
    pl = results.get("pipelines")
    if not pl:
        return []
    sec = pl["batch_s"]
    header = [
        "one alone, s",
        "one alone, records/s",
        "all: first start to last commit, s",
        "all, records/s",
        "batches, s (median, min-max)",
        "slowest ÷ alone",
        "lock-wait samples",
    ]
    row = [
        _f(pl["alone_s"], 2),
        f"{pl['alone_records_per_s']:,}",
        _f(pl["together_wall_s"], 2),
        f"{pl['together_records_per_s']:,}",
        f"{_f(sec['median'], 2)} ({_f(sec['min'], 2)}-{_f(sec['max'], 2)})",
        _f(pl["slowest_vs_alone"], 2),
        f"{pl['samples_with_lock_waits']} of {pl['lock_wait_samples']} (max {pl['max_lock_waiters']} waiting)",
    ]
    return [
        f"## Under the real scheduler: {pl['pipelines']} pipelines at once",
        "",
        f"One `ako_bench_one_task` run per pipeline, triggered together, each its own topic of 8 partitions and "
        f"{pl['records_per_pipeline']:,} new records, on `{pl['spark_conn_id']}` and one ledger, after one uncounted "
        "batch of each; against one of them alone (benchmarks/scheduler_latency.py). Lock waits: PostgreSQL's "
        "`pg_locks` sampled every 50 ms during the run.",
        "",
        *_table(header, [row], "rrrrrrr"),
        "",
    ]


def scheduler_lines(results: dict[str, Any]) -> list[str]:
    sc = results.get("scheduler")
    if not sc:
        return []
    med = sc["median"]
    return [
        "## Under the real scheduler: one-task batches against an empty DAG",
        "",
        f"Runs triggered alternately on the stack's Airflow (scheduler + LocalExecutor), after one uncounted run "
        f"of each; {sc['records']:,} new records ({sc['partitions']} partitions) a batch on `{sc['spark_conn_id']}`; "
        f"median of {sc['rounds']}, seconds (benchmarks/scheduler_latency.py).",
        "",
        *_table(
            [
                "empty DAG: run start to end",
                "one-task batch: run start to commit",
                "one-task batch: run start to end",
                "batch to commit minus empty run",
            ],
            [
                [
                    _f(med["empty_run_s"], 2),
                    _f(med["one_task_to_commit_s"], 2),
                    _f(med["one_task_run_s"], 2),
                    _f(sc["over_empty_s"], 2),
                ]
            ],
            "rrrr",
        ),
        "",
    ]


def plan_lines(results: dict[str, Any]) -> list[str]:
    plan = results.get("plan")
    if not plan:
        return []
    rows = [
        [conn, _f(cases["new"], 0), _f(cases["steady"], 0), _f(cases["replanned"], 0)]
        for conn, cases in plan["median_ms"].items()
    ]
    return [
        "## The plan task's own time",
        "",
        f"`KafkaBatchPlanOperator.execute` in a new Python process per plan (after the imports of a DAG's parse), "
        f"{plan['partitions']} partitions, median of {plan['rounds']}, milliseconds (benchmarks/plan_task.py).",
        "",
        *_table(
            ["Spark connection", "new pipeline", "steady pipeline", "retried (batch already planned)"], rows, "lrrr"
        ),
        "",
    ]


def _connect_floor(med: dict[str, Any]) -> list[str]:
    trivial = med.get("trivial_s")
    if not trivial:
        return []
    return [
        f"A trivial job on the same server (`spark.range(10).count()` on a new session), timed after each batch: "
        f"{_f(trivial, 2)} s median; the batch takes {med['total_s'] / trivial:.1f}x that. Its two Spark jobs "
        "(the Kafka read + Parquet write, the read-back check) are most of it: on a slow or busy machine every job "
        "costs more, which no change in the package removes.",
        "",
    ]


def scaling_lines(results: dict[str, Any]) -> list[str]:
    sc = results.get("scaling")
    if not sc:
        return []
    out = [
        "## Scaling of the ledger and the planner",
        "",
        "No Spark, no Kafka: the package's plan_batch / run_batch / commit_batch on the real PostgreSQL ledger, "
        f"a fake offsets source and a fake Spark submit; median of {sc['batches_timed']} batches, milliseconds. "
        '"attempt" is run_batch without Spark (attempt rows, report check).',
        "",
    ]
    rows = [
        [f"{r['partitions']:,}", _f(r["plan_ms"]), _f(r["commit_ms"]), _f(r["plan_commit_ms"]), _f(r["attempt_ms"])]
        for r in sc["partitions"]
    ]
    out += _table(["partitions", "plan ms", "commit ms", "plan + commit ms", "attempt ms"], rows)
    if sc.get("history"):
        out += [""]
        rows = [
            [
                f"{r['history']:,}",
                f"{r['partitions']}",
                _f(r["plan_ms"]),
                _f(r["commit_ms"]),
                _f(r["plan_commit_ms"]),
                _f(r["attempt_ms"]),
                _f(r["load_s"]),
            ]
            for r in sc["history"]
        ]
        out += _table(
            [
                "committed batches in the ledger",
                "partitions",
                "plan ms",
                "commit ms",
                "plan + commit ms",
                "attempt ms",
                "bulk load s",
            ],
            rows,
        )
    return [*out, ""]


def comparison_lines(before: dict[str, Any], after: dict[str, Any], before_name: str) -> list[str]:
    out = [f"## Before / after (before: `{before_name}`)", ""]
    rows = []
    b_tp = (before.get("throughput") or {}).get("contenders", {})
    a_tp = (after.get("throughput") or {}).get("contenders", {})
    for name in a_tp:
        if name in b_tp:
            b, a = b_tp[name], a_tp[name]
            rows.append(
                [
                    f"throughput: {LABELS.get(name, name)}",
                    f"{_f(b['records_per_s'], 0)} rec/s",
                    f"{_f(a['records_per_s'], 0)} rec/s",
                    f"{a['records_per_s'] / b['records_per_s']:.2f}x",
                ]
            )
    b_ov, a_ov = before.get("overhead"), after.get("overhead")
    if b_ov and a_ov:
        for key, label in OVERHEAD_PHASES:
            if key in b_ov["median"] and key in a_ov["median"]:
                bv, av = b_ov["median"][key], a_ov["median"][key]
                rows.append(
                    [f"one small batch: {label}", f"{_f(bv, 2)} s", f"{_f(av, 2)} s", f"{bv / av:.2f}x" if av else "-"]
                )
    if not rows:
        return []
    return (
        out
        + _table(["figure", "before", "after", "speed-up"], rows)
        + [
            "",
            "Speed-up > 1 is faster. Same harness and data set size; the machine is shared, so differences "
            "of 10-20% are within the noise.",
            "",
        ]
    )


def baseline_lines(results: dict[str, Any]) -> list[str]:
    """Current package against package_baseline, interleaved in the same run (same noise)."""
    rows = []
    tp = (results.get("throughput") or {}).get("contenders", {})
    if "package" in tp and "package_baseline" in tp:
        a, b = tp["package"], tp["package_baseline"]
        rows.append(
            [
                "throughput, records/s",
                _f(b["records_per_s"], 0),
                _f(a["records_per_s"], 0),
                f"{a['records_per_s'] / b['records_per_s']:.2f}x",
            ]
        )
        rows.append(
            [
                "throughput, wall seconds",
                _f(b["seconds"]["median"]),
                _f(a["seconds"]["median"]),
                f"{b['seconds']['median'] / a['seconds']['median']:.2f}x",
            ]
        )
        bc, ac = median_of(r.get("cpu_s") for r in b["runs"]), median_of(r.get("cpu_s") for r in a["runs"])
        if bc and ac:
            rows.append(["throughput, CPU seconds", _f(bc), _f(ac), f"{bc / ac:.2f}x"])
    ov = results.get("overhead") or {}
    if ov.get("baseline"):
        for key, label in OVERHEAD_PHASES:
            bv, av = ov["baseline"]["median"].get(key), ov["median"].get(key)
            if bv is not None and av is not None and key not in ("plan_s", "attempt_bookkeeping_s", "commit_s"):
                rows.append([f"small batch: {label}", _f(bv, 2), _f(av, 2), f"{bv / av:.2f}x" if av else "-"])
    if not rows:
        return []
    return [
        "## Before / after tuning, interleaved in this run",
        "",
        "package_baseline is the same batch with the Spark app and DEFAULT_SPARK_CONF from before the tuning, "
        "run alternately with the current package so both see the same machine load.",
        "",
        *_table(["figure", "before", "after", "speed-up"], rows),
        "",
    ]


def catch_up_lines(results: dict[str, Any]) -> list[str]:
    cu = results.get("catch_up")
    if not cu:
        return []
    from benchmarks.catch_up import summary_line

    return [
        "## Catch-up of a backlog in capped batches, the driver's memory bounded",
        "",
        summary_line(cu) + ".",
        "",
        "Records per batch: " + ", ".join(f"{n:,}" for n in cu["batch_records"]) + "; "
        f"{cu['output_files']} Parquet files, {cu['output_bytes'] / 1e6:,.0f} MB. Resident memory: the largest sum "
        "over the processes spark-submit started (its JVM, where the local[2] driver and executors run, and the "
        "app's Python), sampled every 0.2 s.",
        "",
    ]


def avro_lines(results: dict[str, Any]) -> list[str]:
    av = results.get("avro")
    if not av:
        return []
    med = av["median_s"]
    rows = [[kind, *(_f(med[kind][k], 2) for k in ("plan_s", "read_s", "commit_s", "total_s"))] for kind in med]
    return [
        "## Avro decoding: the same batch raw and decoded, on the warm Spark Connect server",
        "",
        f"{av['records']:,} Avro records of {av['record_bytes']} B ({av['partitions']} partitions, three writer "
        f"versions in turn) as one batch, without a decoding and with `value_format` (median of {av['repeat']}, "
        f"seconds): decoded / raw {av['ratio_total']:.2f} plan to commit, {av['ratio_read']:.2f} the read step "
        f"(goal <= {av['goal']:.2f}).",
        "",
        *_table(["batch", "plan", "read", "commit", "plan to commit"], rows, "lrrrr"),
        "",
    ]


def render(results: dict[str, Any], before: dict[str, Any] | None = None, before_name: str = "") -> str:
    p = results["params"]
    lines = [
        f"# Benchmark results: {results['label']}",
        "",
        f"Run {results['started_at']} - {results['finished_at']} (UTC) with `{results['command']}`.",
        "",
        *machine_lines(results),
        f"- PostgreSQL of the local stack runs with fsync=off (throwaway cluster): commit latencies exclude disk "
        f"flushes; Spark runs local[2]; parameters: {json.dumps(p, sort_keys=True)}",
        "- The machine may be shared with other work: figures are noisy (see the load average and the stolen time); "
        "medians of repeated runs are shown where they were cheap.",
        "",
    ]
    lines += goal_lines(results)
    lines += throughput_lines(results)
    lines += overhead_lines(results)
    lines += connect_lines(results)
    lines += plan_lines(results)
    lines += scheduler_lines(results)
    lines += pipelines_lines(results)
    lines += baseline_lines(results)
    lines += scaling_lines(results)
    lines += avro_lines(results)
    lines += catch_up_lines(results)
    if before:
        lines += comparison_lines(before, results, before_name)
    return "\n".join(lines).rstrip() + "\n"


def readme_summary(results: dict[str, Any], results_name: str) -> str:
    """The README's summary block: the goal figures and the throughput per contender, with the run's conditions."""
    m = results.get("machine", {})
    load = (m.get("loadavg_at_start") or ["?"])[0], (results.get("loadavg_at_end") or ["?"])[0]
    stolen = results.get("cpu_stolen_share")
    stolen_text = f", {stolen:.0%} of CPU time stolen by the hypervisor" if stolen is not None else ""
    lines = [
        README_START,
        f"Generated from `{results_name}` (run {results['started_at']} UTC, its command and every table there; "
        f"{m.get('cpu_cores')} cores, load average {load[0]} at start and {load[1]} at end{stolen_text}).",
        "",
        *goal_lines(results)[2:],
    ]
    tp = (results.get("throughput") or {}).get("contenders", {})
    if tp:
        rows = [
            [
                LABELS.get(name, name),
                _f(c["records_per_s"], 0),
                _f(c["mb_per_s"]),
                _f(c.get("records_per_s_per_core"), 0),
                _f(c.get("mb_per_s_per_core"), 2),
                f"{c['vs_package']:.2f}x" if c.get("vs_package") else "-",
            ]
            for name, c in tp.items()
            if name != "package_baseline"  # an experiment's contender, in the results file
        ]
        ds = results["throughput"]["dataset"]
        lines += [
            f"Throughput, {ds['records']:,} records of ~{ds['payload_bytes'] / max(ds['records'], 1):.0f} B over "
            f"{ds['partitions']} partitions:",
            "",
            *_table(["contender", "records/s", "MB/s", "records/s per core", "MB/s per core", "vs package"], rows),
            "",
        ]
    return "\n".join([*lines, README_END])


def update_readme(readme: Path, results: dict[str, Any], results_name: str) -> None:
    """Replace the block between the README's benchmark markers with this run's summary."""
    text = readme.read_text()
    block = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    if not block.search(text):
        raise ValueError(f"{readme} has no {README_START} ... {README_END} block to update")
    readme.write_text(block.sub(lambda _: readme_summary(results, results_name), text, count=1))


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if not args:
        print("usage: python -m benchmarks.report RESULTS.json [BEFORE.json]", file=sys.stderr)
        return 2
    results = json.loads(Path(args[0]).read_text())
    before = json.loads(Path(args[1]).read_text()) if len(args) > 1 else None
    print(render(results, before, Path(args[1]).name if len(args) > 1 else ""), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
