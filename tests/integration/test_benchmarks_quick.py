"""The benchmarks still run, at tiny sizes (seconds each): the harness's scaling section on the real
ledger; its Spark Connect section and the throughput contenders that start no Spark of their own
(package_connect on the session's warm server, python_consumer, kafka_consumer_perf); and the
stand-alone ones: pipelines_page, table_commits, multi_table_commits, merge_cost's package (its Spark step
on the warm Connect server), worker and full-rewrite contenders, profile_connect, and profile_read's write
and read-back steps (one local Spark session: about 10 s).

Not run here, as each needs spark-submit's JVMs (tens of seconds per batch on 2 cores): the
harness's overhead section and its package, package_baseline and structured_streaming contenders,
profile_setup, connect_latency's spark-submit half, merge_cost's spark-submit contenders (Spark MERGE INTO, and
the package's step by spark-submit). Their modules are covered by
tests/unit/test_dev_modules_import.py and mypy.

Figures are not checked (they are not tests); only that each produced its output with the expected
keys, so it cannot silently rot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_benchmark(module: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.<module>`` with these arguments, as scripts/bench runs the harness."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "scripts")])}
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def run_harness(*args: str, timeout: float) -> None:
    run_benchmark("run", *args, timeout=timeout)


def test_quick_scaling_writes_json_and_markdown(stack, tmp_path: Path) -> None:
    run_harness(
        "--only",
        "scaling",
        "--scaling-partitions",
        "2,20",
        "--scaling-history",
        "10,200",
        "--history-partitions",
        "2",
        "--scaling-batches",
        "2",
        "--label",
        "quick-test",
        "--out-dir",
        str(tmp_path),
        timeout=120,
    )

    results = json.loads((tmp_path / "quick-test.json").read_text())
    assert {"format", "label", "command", "params", "machine", "started_at", "finished_at", "scaling"} <= set(results)
    assert {"cpu_cores", "memory_gib", "pyspark", "postgresql", "kafka_broker", "java"} <= set(results["machine"])
    scaling = results["scaling"]
    assert [r["partitions"] for r in scaling["partitions"]] == [2, 20]
    assert [r["history"] for r in scaling["history"]] == [10, 200]
    for row in scaling["partitions"] + scaling["history"]:
        assert {"plan_ms", "attempt_ms", "commit_ms", "plan_commit_ms", "statements"} <= set(row)
        assert row["plan_ms"] > 0 and row["commit_ms"] > 0
        assert row["statements"] and {"sql", "ms_per_batch", "calls_per_batch"} <= set(row["statements"][0])
    assert all("load_s" in row for row in scaling["history"])

    markdown = (tmp_path / "quick-test.md").read_text()
    assert "## Scaling of the ledger and the planner" in markdown
    assert "| 200 |" in markdown.replace(",", "")


def test_quick_connect_section_reports_goals_and_updates_readme(spark_connect: str, tmp_path: Path) -> None:
    """The Spark Connect section, and the throughput contenders without a spark-submit (the package's
    batch on the session's warm server, the Python consumer, Kafka's ConsumerPerformance) on 2,000
    records: their figures, the summary of the goals, and the README block rewritten from them."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "before\n<!-- benchmarks:summary:start -->\nold figures\n<!-- benchmarks:summary:end -->\nafter\n"
    )
    run_harness(
        "--only",
        "throughput,connect",
        "--contenders",
        "package_connect,structured_streaming_connect,python_consumer,kafka_consumer_perf",
        "--records",
        "2000",
        "--repeat",
        "1",
        "--connect-records",
        "200",
        "--connect-batches",
        "1",
        "--label",
        "quick-connect",
        "--out-dir",
        str(tmp_path),
        "--update-readme",
        str(readme),
        timeout=300,
    )

    results = json.loads((tmp_path / "quick-connect.json").read_text())
    connect = results["connect"]
    assert (connect["records"], connect["partitions"], connect["repeat"]) == (200, 4, 1)
    assert len(connect["runs"]) == 1
    assert connect["median"]["total_s"] == round(connect["runs"][0]["total_s"], 3) > 0
    assert set(connect["median"]) == {"plan_s", "read_s", "commit_s", "total_s", "trivial_s"}
    assert connect["median"]["trivial_s"] == round(connect["runs"][0]["trivial_s"], 3) > 0
    assert results["goals"]["connect_batch_s"] == connect["median"]["total_s"]
    assert results["goals"]["batch_vs_trivial_submit"] is None  # the overhead section did not run
    contenders = results["throughput"]["contenders"]
    assert list(contenders) == [
        "package_connect",
        "structured_streaming_connect",
        "python_consumer",
        "kafka_consumer_perf",
    ]
    (on_connect,) = contenders["package_connect"]["runs"]
    assert on_connect["records"] == 2000 and on_connect["cpu_s"] > 0  # the server's CPU counts
    (streaming,) = contenders["structured_streaming_connect"]["runs"]  # AvailableNow on the same server
    assert streaming["records"] == 2000 and streaming["cpu_s"] > 0
    assert results["goals"]["package_connect_vs_structured_streaming_connect"] > 0
    (consumer,) = contenders["python_consumer"]["runs"]
    assert consumer["records"] == 2000 and consumer["output_files"] == 1
    (perf,) = contenders["kafka_consumer_perf"]["runs"]
    assert perf["records"] >= 2000 and "data.consumed.in.nMsg" in perf["tool_reported"]
    for entry in contenders.values():
        assert entry["records_per_s"] > 0 and "vs_package" not in entry  # the spark-submit batch did not run
    assert results["goals"]["package_connect_vs_python_consumer"] > 0
    assert results["goals"]["package_vs_python_consumer"] is None

    markdown = (tmp_path / "quick-connect.md").read_text()
    assert "## Summary" in markdown and "## Spark Connect: one small batch on a warm server" in markdown
    assert "A trivial job on the same server" in markdown
    text = readme.read_text()
    assert text.startswith("before\n<!-- benchmarks:summary:start -->\nGenerated from ") and text.endswith(
        "<!-- benchmarks:summary:end -->\nafter\n"
    )
    assert "old figures" not in text
    seconds = connect["median"]["total_s"]
    assert f"| small batch on a warm Spark Connect server, plan to commit, seconds | {seconds:.2f} s |" in text


def test_quick_pipelines_page(stack) -> None:
    """The pipelines page on a generated ledger of 150 partitions (two pages) and 40 batches, and the plans
    of the queries a request runs."""
    out = run_benchmark("pipelines_page", "--partitions", "150", "--batches", "40", "--runs", "1", timeout=120).stdout
    assert "Kafka pipelines page: 150 partitions, 40 batches" in out
    for request in ("overview", "pipeline, first page", "pipeline, page 2"):
        assert f"  {request} " in out
    plans = out.split("\n\n")[1:]  # "<n>. <statement>:" and its plan
    assert len(plans) >= 4 and any("FROM cursors" in plan for plan in plans), out
    assert all(len(plan.splitlines()) >= 2 for plan in plans), out


def test_quick_table_commits(stack) -> None:
    """One publication cost per sink and storage: directory, Iceberg and Delta locally, the tables on S3."""
    err = run_benchmark("table_commits", "--batches", "2", "--records", "100", timeout=180).stderr
    cases = [
        line.split()[1:3]
        for line in err.splitlines()
        if line.startswith("bench: ") and line.endswith(tuple("0123456789"))
    ]
    assert cases == [
        ["directory", "local"],
        ["iceberg", "local"],
        ["delta", "local"],
        ["iceberg", "s3"],
        ["delta", "s3"],
    ], err


def test_quick_profile_connect(spark_connect: str) -> None:
    """Each step of the app timed on the warm Spark Connect server: the functions it wraps still exist."""
    out = run_benchmark("profile_connect", "--records", "200", "--batches", "1", timeout=180).stdout
    summary = json.loads(out[out.index('{\n "records"') :])
    assert (summary["records"], summary["batches"]) == (200, 1)
    steps = summary["median_s"]
    assert {"plan", "Kafka read + Parquet write job", "footers (proof)", "report", "commit", "total"} <= set(steps)
    assert steps["total"] > 0


def test_quick_profile_against_available_now(spark_connect: str) -> None:
    """The package's batch and AvailableNow in turn on one topic and server: wall and server CPU seconds, and
    the package's steps (each checks its committed or written count)."""
    args = ("--against-available-now", "--records", "60000", "--partitions", "2", "--batches", "1")
    out = run_benchmark("profile_connect", *args, timeout=240).stdout
    summary = json.loads(out[out.index('{\n "records"') :])
    assert (summary["records"], summary["partitions"], summary["rounds"]) == (60_000, 2, 1)
    median = summary["median"]
    assert {"package_s", "package_server_cpu_s", "available_now_s", "available_now_server_cpu_s"} <= set(median)
    assert "Kafka read + Parquet write job (server CPU s)" in median
    assert "read-back check job (server CPU s)" not in median  # proved from the footers: no second Spark job
    assert median["ratio_records_per_s"] > 0 and median["ratio_server_cpu"] > 0


def test_quick_profile_read(stack) -> None:
    """The app's Parquet write, read-back check and counts per range as their own Spark jobs in a local session:
    the names it uses from the Spark app (its columns, read settings, summarize, with_range_metrics) still exist,
    and the observed counts add up to the records produced."""
    args = ("--records", "400", "--repeat", "1", "--steps", "zstd,read_back,observed")
    out = run_benchmark("profile_read", *args, timeout=240).stdout
    steps = json.loads(out[out.index("{") :])
    want = {"write_parquet_zstd", "read_back", "read_back_narrow", "write_parquet_plain", "write_parquet_observed",
            "write_parquet_observed_sums"}  # fmt: skip
    assert set(steps) == want, out
    assert all(step["seconds"] > 0 for step in steps.values())


def test_quick_merge_cost_applies_one_change_set_the_same_way_in_every_contender(stack, spark_connect) -> None:
    """A mirror's merge on 20,000 rows in 10 files, Iceberg and Delta: the package's merge with Spark's rewrite
    (on the warm Connect server), the worker's own and a full rewrite each leave the same rows (the benchmark
    checks the count and the sum of a column); the clustered changes rewrite one file of ten, the full rewrite
    every file."""
    args = ("--rows", "20000", "--changes", "300", "--file-rows", "2000", "--spreads", "clustered", "--no-spark")
    out = run_benchmark("merge_cost", *args, "--spark-connect", spark_connect, timeout=300).stdout
    results = json.loads(out[out.index("{") :])["merge_cost"]
    assert sorted(results) == ["delta-clustered", "iceberg-clustered"]
    for result in results.values():
        assert (result["rows"], result["changes"], result["files"]) == (20_000, 300, 10)
        spark, package, full = result["package_spark"], result["package"], result["full_rewrite"]
        assert spark["rows"] == package["rows"] == full["rows"] == 20_000 - 45 + 45  # 15% delete, 15% are new
        assert spark["qty_sum"] == package["qty_sum"] == full["qty_sum"]
        assert (spark["files_removed"], package["files_removed"], full["files_removed"]) == (1, 1, 10)
        assert package["bytes_removed"] < full["bytes_removed"] / 5
        assert spark["statement_s"] > 0 and spark["commit_s"] >= 0
        assert "spark_merge_into" not in result


def test_quick_multi_table_commits(stack) -> None:
    """The commit of one batch into two Iceberg tables (one PostgreSQL transaction) and two Delta tables."""
    err = run_benchmark("multi_table_commits", "--tables", "2", "--batches", "2", "--records", "10", timeout=120).stderr
    cases = [line.split()[1:3] for line in err.splitlines() if line.startswith("bench: ") and line[-1].isdigit()]
    assert cases == [["iceberg", "2"], ["delta", "2"]]


def test_plan_section_times_new_steady_and_retried_plans_in_new_processes(stack, tmp_path: Path) -> None:
    run_harness("--only", "plan", "--plan-rounds", "1", "--label", "plan-test", "--out-dir", str(tmp_path), timeout=300)

    results = json.loads((tmp_path / "plan-test.json").read_text())
    plan = results["plan"]
    assert plan["partitions"] == 8 and plan["rounds"] == 1
    assert set(plan["median_ms"]) == {"spark_default", "spark_connect_default"}
    for cases in plan["median_ms"].values():
        assert set(cases) == {"new", "steady", "replanned"}
        assert all(ms > 0 for ms in cases.values())
    assert results["goals"]["plan_task_steady_ms"] == max(c["steady"] for c in plan["median_ms"].values())
    assert "## The plan task's own time" in (tmp_path / "plan-test.md").read_text()


def test_scheduler_and_pipelines_sections_run_one_task_batches_on_the_real_scheduler(
    stack, airflow_ui, tmp_path: Path
) -> None:
    run_harness(
        "--only",
        "scheduler,pipelines",
        "--scheduler-rounds",
        "1",
        "--scheduler-records",
        "200",
        "--pipelines",
        "2",
        "--pipeline-records",
        "100",
        "--label",
        "sched-test",
        "--out-dir",
        str(tmp_path),
        timeout=600,
    )

    results = json.loads((tmp_path / "sched-test.json").read_text())
    scheduler = results["scheduler"]
    assert (scheduler["records"], scheduler["rounds"], scheduler["spark_conn_id"]) == (200, 1, "spark_connect_default")
    med = scheduler["median"]
    assert 0 < med["empty_run_s"] and 0 < med["one_task_to_commit_s"] <= med["one_task_run_s"]
    assert results["goals"]["one_task_over_empty_s"] == scheduler["over_empty_s"]
    many = results["pipelines"]
    assert (many["pipelines"], many["records_per_pipeline"]) == (2, 100)
    assert many["alone_s"] > 0 and many["together_records_per_s"] > 0 and many["lock_wait_samples"] > 0
    assert results["goals"]["pipelines_slowest_vs_alone"] == many["slowest_vs_alone"]
    markdown = (tmp_path / "sched-test.md").read_text()
    assert "## Under the real scheduler: one-task batches" in markdown
    assert "## Under the real scheduler: 2 pipelines at once" in markdown


def test_quick_avro_section_times_the_batch_raw_and_decoded(spark_connect: str, tmp_path: Path) -> None:
    """The Avro section on 300 records: the same topic read raw and decoded on the warm Connect server
    (each batch checked: every record committed, none a decode error), its ratios and its report table."""
    args = ("--only", "avro", "--records", "300", "--partitions", "2", "--repeat", "1")
    run_harness(*args, "--label", "quick-avro", "--out-dir", str(tmp_path), timeout=240)
    avro = json.loads((tmp_path / "quick-avro.json").read_text())["avro"]
    assert (avro["records"], avro["partitions"], avro["goal"]) == (300, 2, 1.3)
    assert 450 <= avro["record_bytes"] <= 550
    assert [len(avro["batches"][kind]) for kind in ("raw", "avro", "avro_no_raw")] == [1, 1, 1]
    assert avro["ratio_total"] > 0 and avro["ratio_read"] > 0
    assert avro["no_raw_ratio_total"] > 0 and avro["no_raw_ratio_read"] > 0
    assert len(avro["ratio_total_per_round"]) == len(avro["no_raw_ratio_total_per_round"]) == 1
    markdown = (tmp_path / "quick-avro.md").read_text()
    assert "## Avro decoding: the same batch raw and decoded" in markdown
    assert "decoded / raw" in markdown and "with `keep_raw_value=False`" in markdown
    assert "each round against its raw batch" in markdown


def test_quick_catch_up_section_drains_a_backlog_in_capped_batches_with_the_drivers_memory(
    stack, tmp_path: Path
) -> None:
    """The catch_up section on 3,000 records in batches of 1,500 by spark-submit with a 512 MiB driver:
    every record committed once (the section checks the ledger and the Parquet rows), the driver's
    processes' peak resident memory measured."""
    args = ("--only", "catch_up", "--catch-up-records", "3000", "--catch-up-cap", "1500", "--driver-memory", "512m")
    run_harness(*args, "--label", "quick-catch-up", "--out-dir", str(tmp_path), timeout=300)
    result = json.loads((tmp_path / "quick-catch-up.json").read_text())["catch_up"]
    figures = (result["records"], result["cap"], result["batches"], result["batch_records"])
    assert figures == (3000, 1500, 2, [1500, 1500])
    assert result["driver_memory"] == "512m"
    assert 100 * 2**20 < result["peak_rss_bytes"] < 4 * 2**30
    markdown = (tmp_path / "quick-catch-up.md").read_text()
    assert "## Catch-up of a backlog in capped batches, the driver's memory bounded" in markdown
    assert "catch-up of 3,000 records in 2 batches of at most 1,500 by spark-submit" in markdown
