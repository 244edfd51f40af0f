"""The benchmark report's sections on speed: the machine, throughput, one batch's overhead, Spark
Connect, before/after."""

from __future__ import annotations

from typing import Any

from benchmarks.goals import LABELS
from benchmarks.markdown import fmt, median_of, table


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
                f"{fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])})",
                fmt(c["records_per_s"], 0),
                fmt(c["mb_per_s"]),
                fmt(c.get("records_per_s_per_core"), 0),
                fmt(c.get("mb_per_s_per_core"), 2),
                f"{c['vs_package']:.2f}x" if c.get("vs_package") else "-",
                fmt(cpu),
                fmt(c.get("records_per_cpu_s"), 0),
            ]
        )
    headers = ["contender", "seconds", "records/s", "MB/s", "records/s per core", "MB/s per core", "vs package"]
    out += table([*headers, "CPU s", "records per CPU s"], rows)
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
            f"{fmt(tool.get('fetch.nMsg.sec'), 0)} records/s, {fmt(tool.get('fetch.MB.sec'))} MiB/s.",
        ]
    for name in ("package", "package_baseline"):
        split = tp["contenders"].get(name, {}).get("median_split")
        if split:
            what = "the package's" if name == "package" else "the baseline's"
            out += [
                "",
                f"Where {what} time goes (medians, seconds): "
                + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {fmt(v)}" for k, v in split.items()),
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
            f"{fmt(sec['median'], 2)} s ({fmt(sec['min'], 2)}-{fmt(sec['max'], 2)}); the batch takes "
            f"{fmt(ov['vs_trivial_submit'], 2)}x that.",
            "",
        ]
    base = (ov.get("baseline") or {}).get("median")
    if base:
        rows = [
            [label, fmt(ov["median"].get(key), 2), fmt(base.get(key), 2)]
            for key, label in OVERHEAD_PHASES
            if key in ov["median"]
        ]
        return out + table(["phase", "seconds", "baseline seconds (before tuning)"], rows) + [""]
    rows = [[label, fmt(ov["median"].get(key), 2)] for key, label in OVERHEAD_PHASES if key in ov["median"]]
    return out + table(["phase", "seconds"], rows) + [""]


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
        *table(
            ["plan", "read (the app on the server)", "commit", "plan to commit (min-max)"],
            [
                [
                    fmt(med["plan_s"], 2),
                    fmt(med["read_s"], 2),
                    fmt(med["commit_s"], 2),
                    f"{fmt(med['total_s'], 2)} ({fmt(sec['min'], 2)}-{fmt(sec['max'], 2)})",
                ]
            ],
            "rrrr",
        ),
        "",
        *_connect_floor(med),
    ]


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
                    f"{fmt(b['records_per_s'], 0)} rec/s",
                    f"{fmt(a['records_per_s'], 0)} rec/s",
                    f"{a['records_per_s'] / b['records_per_s']:.2f}x",
                ]
            )
    b_ov, a_ov = before.get("overhead"), after.get("overhead")
    if b_ov and a_ov:
        for key, label in OVERHEAD_PHASES:
            if key in b_ov["median"] and key in a_ov["median"]:
                bv, av = b_ov["median"][key], a_ov["median"][key]
                rows.append(
                    [
                        f"one small batch: {label}",
                        f"{fmt(bv, 2)} s",
                        f"{fmt(av, 2)} s",
                        f"{bv / av:.2f}x" if av else "-",
                    ]
                )
    if not rows:
        return []
    return (
        out
        + table(["figure", "before", "after", "speed-up"], rows)
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
                fmt(b["records_per_s"], 0),
                fmt(a["records_per_s"], 0),
                f"{a['records_per_s'] / b['records_per_s']:.2f}x",
            ]
        )
        rows.append(
            [
                "throughput, wall seconds",
                fmt(b["seconds"]["median"]),
                fmt(a["seconds"]["median"]),
                f"{b['seconds']['median'] / a['seconds']['median']:.2f}x",
            ]
        )
        bc, ac = median_of(r.get("cpu_s") for r in b["runs"]), median_of(r.get("cpu_s") for r in a["runs"])
        if bc and ac:
            rows.append(["throughput, CPU seconds", fmt(bc), fmt(ac), f"{bc / ac:.2f}x"])
    ov = results.get("overhead") or {}
    if ov.get("baseline"):
        for key, label in OVERHEAD_PHASES:
            bv, av = ov["baseline"]["median"].get(key), ov["median"].get(key)
            if bv is not None and av is not None and key not in ("plan_s", "attempt_bookkeeping_s", "commit_s"):
                rows.append([f"small batch: {label}", fmt(bv, 2), fmt(av, 2), f"{bv / av:.2f}x" if av else "-"])
    if not rows:
        return []
    return [
        "## Before / after tuning, interleaved in this run",
        "",
        "package_baseline is the same batch with the Spark app and DEFAULT_SPARK_CONF from before the tuning, "
        "run alternately with the current package so both see the same machine load.",
        "",
        *table(["figure", "before", "after", "speed-up"], rows),
        "",
    ]


def _connect_floor(med: dict[str, Any]) -> list[str]:
    trivial = med.get("trivial_s")
    if not trivial:
        return []
    return [
        f"A trivial job on the same server (`spark.range(10).count()` on a new session), timed after each batch: "
        f"{fmt(trivial, 2)} s median; the batch takes {med['total_s'] / trivial:.1f}x that. Its two Spark jobs "
        "(the Kafka read + Parquet write, the read-back check) are most of it: on a slow or busy machine every job "
        "costs more, which no change in the package removes.",
        "",
    ]
