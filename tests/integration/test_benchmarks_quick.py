"""The benchmark harness still runs: its scaling part on the real ledger and its Spark Connect part on the
session's warm server, tiny sizes (seconds).

Figures are not checked (they are not tests); only that the harness produced its JSON and
Markdown with the expected keys, so it cannot silently rot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_harness(*args: str, timeout: float) -> None:
    """``python -m benchmarks.run`` with these arguments, as scripts/bench runs it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "scripts")])}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


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
    """The Spark Connect section and throughput contender on the session's warm server (batches of 200
    and 2,000 records, seconds): their figures, the summary of the goals, and the README block
    rewritten from them."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "before\n<!-- benchmarks:summary:start -->\nold figures\n<!-- benchmarks:summary:end -->\nafter\n"
    )
    run_harness(
        "--only",
        "throughput,connect",
        "--contenders",
        "package_connect",
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
    (on_connect,) = results["throughput"]["contenders"]["package_connect"]["runs"]
    assert on_connect["records"] == 2000 and on_connect["cpu_s"] > 0  # the server's CPU counts
    assert results["goals"]["package_connect_vs_python_consumer"] is None  # the consumer did not run

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
