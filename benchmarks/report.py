"""Render a results JSON (see run.py) as Markdown, optionally side by side with an earlier run."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from benchmarks.goals import LABELS, goal_lines, goals
from benchmarks.markdown import fmt, table
from benchmarks.report_scale import (
    avro_lines,
    catch_up_lines,
    pipelines_lines,
    plan_lines,
    scaling_lines,
    scheduler_lines,
)
from benchmarks.report_speed import (
    baseline_lines,
    comparison_lines,
    connect_lines,
    machine_lines,
    overhead_lines,
    throughput_lines,
)

__all__ = ["goals", "readme_summary", "render", "update_readme"]

README_START = "<!-- benchmarks:summary:start -->"


README_END = "<!-- benchmarks:summary:end -->"


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
                fmt(c["records_per_s"], 0),
                fmt(c["mb_per_s"]),
                fmt(c.get("records_per_s_per_core"), 0),
                fmt(c.get("mb_per_s_per_core"), 2),
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
            *table(["contender", "records/s", "MB/s", "records/s per core", "MB/s per core", "vs package"], rows),
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
