"""The benchmark harness still runs: its scaling part, tiny sizes, on the real ledger (seconds).

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


def test_quick_scaling_writes_json_and_markdown(stack, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "scripts")])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
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
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

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
