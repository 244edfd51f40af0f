"""The benchmark report's sections on scale: the plan task, the scheduler, many pipelines, the ledger,
Avro, catch-up."""

from __future__ import annotations

from typing import Any

from benchmarks.markdown import fmt, table


def plan_lines(results: dict[str, Any]) -> list[str]:
    plan = results.get("plan")
    if not plan:
        return []
    rows = [
        [conn, fmt(cases["new"], 0), fmt(cases["steady"], 0), fmt(cases["replanned"], 0)]
        for conn, cases in plan["median_ms"].items()
    ]
    return [
        "## The plan task's own time",
        "",
        f"`KafkaBatchPlanOperator.execute` in a new Python process per plan (after the imports of a DAG's parse), "
        f"{plan['partitions']} partitions, median of {plan['rounds']}, milliseconds (benchmarks/plan_task.py).",
        "",
        *table(
            ["Spark connection", "new pipeline", "steady pipeline", "retried (batch already planned)"], rows, "lrrr"
        ),
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
        *table(
            [
                "empty DAG: run start to end",
                "one-task batch: run start to commit",
                "one-task batch: run start to end",
                "batch to commit minus empty run",
            ],
            [
                [
                    fmt(med["empty_run_s"], 2),
                    fmt(med["one_task_to_commit_s"], 2),
                    fmt(med["one_task_run_s"], 2),
                    fmt(sc["over_empty_s"], 2),
                ]
            ],
            "rrrr",
        ),
        "",
    ]


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
        fmt(pl["alone_s"], 2),
        f"{pl['alone_records_per_s']:,}",
        fmt(pl["together_wall_s"], 2),
        f"{pl['together_records_per_s']:,}",
        f"{fmt(sec['median'], 2)} ({fmt(sec['min'], 2)}-{fmt(sec['max'], 2)})",
        fmt(pl["slowest_vs_alone"], 2),
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
        *table(header, [row], "rrrrrrr"),
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
        [f"{r['partitions']:,}", fmt(r["plan_ms"]), fmt(r["commit_ms"]), fmt(r["plan_commit_ms"]), fmt(r["attempt_ms"])]
        for r in sc["partitions"]
    ]
    out += table(["partitions", "plan ms", "commit ms", "plan + commit ms", "attempt ms"], rows)
    if sc.get("history"):
        out += [""]
        rows = [
            [
                f"{r['history']:,}",
                f"{r['partitions']}",
                fmt(r["plan_ms"]),
                fmt(r["commit_ms"]),
                fmt(r["plan_commit_ms"]),
                fmt(r["attempt_ms"]),
                fmt(r["load_s"]),
            ]
            for r in sc["history"]
        ]
        out += table(
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


def rounds(section: dict[str, Any], key: str) -> str:
    return ", ".join(f"{r:.2f}" for r in section.get(key, [])) or "-"


def avro_lines(results: dict[str, Any]) -> list[str]:
    av = results.get("avro")
    if not av:
        return []
    med = av["median_s"]
    rows = [[kind, *(fmt(med[kind][k], 2) for k in ("plan_s", "read_s", "commit_s", "total_s"))] for kind in med]
    return [
        "## Avro decoding: the same batch raw and decoded, on the warm Spark Connect server",
        "",
        f"{av['records']:,} Avro records of {av['record_bytes']} B ({av['partitions']} partitions, three writer "
        f"versions in turn) as one batch, without a decoding, with `value_format` (the raw value kept) and with "
        f"`keep_raw_value=False` too (median of {av['repeat']}, seconds): decoded / raw {av['ratio_total']:.2f} "
        f"plan to commit, {av['ratio_read']:.2f} the read step; with `keep_raw_value=False` "
        f"{av['no_raw_ratio_total']:.2f} and {av['no_raw_ratio_read']:.2f} (goal <= {av['goal']:.2f}). Plan to "
        f"commit, each round against its raw batch: {rounds(av, 'ratio_total_per_round')} with the raw value, "
        f"{rounds(av, 'no_raw_ratio_total_per_round')} without.",
        "",
        *table(["batch", "plan", "read", "commit", "plan to commit"], rows, "lrrrr"),
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
