"""The package's speed goals and the figures of a results file that measure them."""

from __future__ import annotations

from typing import Any

from benchmarks.markdown import table

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
        "pipelines_vs_one": ratio(pl.get("together_records_per_s"), pl.get("alone_records_per_s")),
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
    return ["## Summary", "", *table(["figure", "value", "target", "met"], rows), ""]


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None
