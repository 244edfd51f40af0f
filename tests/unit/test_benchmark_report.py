"""The benchmark report's summary of the issue's goals: ratios, per-core figures, targets, the README block."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.report import goals, readme_summary, render, update_readme
from benchmarks.sections import rate_figures, round_ratios


def results() -> dict:
    contender = {"seconds": {"median": 10.0, "min": 9.0, "max": 11.0}, "runs": [{"cpu_s": 8.0}]}
    return {
        "label": "t",
        "command": "benchmarks/run.py",
        "started_at": "2026-11-22 12:00:00",
        "finished_at": "2026-11-22 12:10:00",
        "params": {},
        "machine": {"cpu_cores": 2, "loadavg_at_start": [1.0, 1.0, 1.0]},
        "loadavg_at_end": [2.0, 2.0, 2.0],
        "throughput": {
            "dataset": {"records": 1000, "payload_bytes": 500_000, "partitions": 8},
            "repeat": 1,
            "cores": 2,
            "contenders": {
                "package": {
                    **contender,
                    "records_per_s": 100.0,
                    "mb_per_s": 0.05,
                    "records_per_s_per_core": 50.0,
                    "mb_per_s_per_core": 0.03,
                    "records_per_cpu_s": 125.0,
                    "vs_package": 1.0,
                },
                "structured_streaming": {**contender, "records_per_s": 80.0, "mb_per_s": 0.04, "vs_package": 0.8},
                "python_consumer": {**contender, "records_per_s": 400.0, "mb_per_s": 0.2, "vs_package": 4.0},
            },
        },
        "overhead": {
            "records": 10_000,
            "partitions": 8,
            "repeat": 3,
            "median": {"total_s": 23.0},
            "runs": [],
            "trivial_submit": {"seconds": {"median": 20.0, "min": 19.0, "max": 21.0}},
            "vs_trivial_submit": 1.15,
        },
        "connect": {
            "records": 10_000,
            "partitions": 4,
            "repeat": 3,
            "runs": [],
            "median": {"plan_s": 0.07, "read_s": 1.9, "commit_s": 0.01, "total_s": 1.98, "trivial_s": 0.5},
            "seconds": {"median": 1.98, "min": 1.8, "max": 2.5},
        },
        "scaling": {
            "batches_timed": 5,
            "partitions": [
                {"partitions": p, "plan_ms": ms / 2, "commit_ms": ms / 2, "plan_commit_ms": ms, "attempt_ms": 1.0}
                for p, ms in ((1000, 91.6), (10000, 1020.4))
            ],
        },
    }


def test_goals_are_the_ratios_of_the_sections() -> None:
    assert goals(results()) == {
        "package_vs_structured_streaming": 1.25,
        "package_vs_python_consumer": 0.25,
        "package_connect_vs_structured_streaming": None,
        "package_connect_vs_structured_streaming_connect": None,
        "package_connect_vs_python_consumer": None,
        "batch_vs_trivial_submit": 1.15,
        "trivial_submit_s": 20.0,
        "connect_batch_s": 1.98,
        "ledger_1000_ms": 91.6,
        "ledger_10000_ms": 1020.4,
        "plan_task_new_ms": None,  # no plan section in these results
        "plan_task_steady_ms": None,
        "one_task_over_empty_s": None,
        "pipelines_vs_one": None,
        "pipelines_slowest_vs_alone": None,
    }
    assert set(goals({}).values()) == {None}


def test_the_plan_scheduler_and_pipelines_sections_give_their_goals_and_tables() -> None:
    found = {
        **results(),
        "plan": {
            "partitions": 8,
            "rounds": 3,
            "median_ms": {
                "spark_default": {"new": 150.0, "steady": 120.0, "replanned": 90.0},
                "spark_connect_default": {"new": 180.0, "steady": 110.0, "replanned": 95.0},
            },
        },
        "scheduler": {
            "records": 10_000,
            "partitions": 8,
            "rounds": 5,
            "spark_conn_id": "spark_connect_default",
            "median": {"empty_run_s": 1.5, "one_task_to_commit_s": 4.0, "one_task_run_s": 4.4},
            "over_empty_s": 2.5,
        },
        "pipelines": {
            "pipelines": 20,
            "records_per_pipeline": 10_000,
            "spark_conn_id": "spark_connect_default",
            "alone_s": 4.0,
            "alone_records_per_s": 2500,
            "together_wall_s": 20.0,
            "together_records_per_s": 10_000,
            "batch_s": {"median": 9.0, "min": 4.5, "max": 12.0},
            "slowest_vs_alone": 3.0,
            "lock_wait_samples": 400,
            "samples_with_lock_waits": 2,
            "max_lock_waiters": 1,
        },
    }
    got = goals(found)
    assert (got["plan_task_new_ms"], got["plan_task_steady_ms"]) == (180.0, 120.0)  # the slower connection
    assert (got["one_task_over_empty_s"], got["pipelines_vs_one"], got["pipelines_slowest_vs_alone"]) == (2.5, 4.0, 3.0)
    markdown = render({**found, "goals": got})
    assert "| spark_connect_default | 180 | 110 | 95 |" in markdown
    assert "| 1.50 | 4.00 | 4.40 | 2.50 |" in markdown
    assert "## Under the real scheduler: 20 pipelines at once" in markdown
    assert "2 of 400 (max 1 waiting)" in markdown


def test_render_shows_targets_met_and_missed_and_per_core_columns() -> None:
    markdown = render(results())
    assert "| small batch (spark-submit) ÷ a trivial spark-submit, wall seconds | 1.15x | ≤ 1.2 | yes |" in markdown
    assert "| small batch on a warm Spark Connect server, plan to commit, seconds | 1.98 s | ≤ 1.5 | no |" in markdown
    same_mode = "| throughput, same mode (both spark-submit): package ÷ Structured Streaming (AvailableNow), records/s"
    assert f"{same_mode} | 1.25x | ≥ 1.2 | yes |" in markdown
    assert "| ledger: plan + commit of a batch of 1,000 partitions, milliseconds | 92 ms | ≤ 100 | yes |" in markdown
    ten_thousand = "| ledger: plan + commit of a batch of 10,000 partitions, milliseconds | 1,020 ms | ≤ 1000 | no |"
    assert ten_thousand in markdown
    assert "timed after each batch: 0.50 s median; the batch takes 4.0x that" in markdown
    assert "records/s per core" in markdown and "| 50 | 0.03 |" in markdown


def test_update_readme_replaces_only_the_marked_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- benchmarks:summary:start -->\nx\n<!-- benchmarks:summary:end -->\nb\n")
    update_readme(readme, results(), "benchmarks/results/t.md")
    assert readme.read_text() == "a\n" + readme_summary(results(), "benchmarks/results/t.md") + "\nb\n"
    assert "Generated from `benchmarks/results/t.md`" in readme.read_text()

    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="no <!-- benchmarks:summary:start -->"):
        update_readme(readme, results(), "t.md")
    assert readme.read_text() == "no markers\n"


def test_rate_figures_per_core_and_per_cpu_second() -> None:
    assert rate_figures(1_000_000, 500_000_000, 50.0, 80.0, 2) == {
        "records_per_s": 20_000.0,
        "mb_per_s": 10.0,
        "records_per_s_per_core": 10_000.0,
        "mb_per_s_per_core": 5.0,
        "records_per_cpu_s": 12_500.0,
    }
    assert rate_figures(10, 10, 1.0, None, 2)["records_per_cpu_s"] is None


def test_the_share_of_cpu_time_stolen_by_the_hypervisor_is_steal_over_all_ticks_between_two_samples() -> None:
    from benchmarks.common import stolen_share

    # user nice system idle iowait irq softirq steal (guest columns are already in user)
    start = [100, 0, 50, 800, 0, 0, 0, 50, 0, 0]
    end = [400, 0, 100, 1000, 0, 0, 0, 250, 0, 0]
    assert stolen_share(start, end) == 0.267  # 200 stolen of 750 ticks
    assert stolen_share([], end) is None
    assert stolen_share(start, start) is None


def test_the_report_and_the_readme_block_say_how_much_cpu_time_was_stolen() -> None:
    run = {**results(), "cpu_stolen_share": 0.22}
    assert "CPU time stolen by the hypervisor during the run (`/proc/stat`): 22%" in render(run)
    assert "22% of CPU time stolen by the hypervisor" in readme_summary(run, "t.md")
    assert "stolen by the hypervisor" not in render(results())


def test_the_connect_ratios_lead_with_the_same_mode_contender_and_name_the_cross_mode_one() -> None:
    run = results()
    contenders = run["throughput"]["contenders"]
    for name, rate in (("package_connect", 200.0), ("structured_streaming_connect", 125.0)):
        contenders[name] = {
            "seconds": {"median": 5.0, "min": 5.0, "max": 5.0},
            "runs": [],
            "records_per_s": rate,
            "mb_per_s": 0.1,
            "vs_package": 2.0,
        }
    found = goals(run)
    assert found["package_connect_vs_structured_streaming_connect"] == 1.6
    assert (found["package_connect_vs_structured_streaming"], found["package_connect_vs_python_consumer"]) == (2.5, 0.5)
    markdown = render(run)
    summary = markdown[markdown.index("## Summary") :]
    first = summary.splitlines()[4]
    assert first == (
        "| throughput, same mode (both on the warm Spark Connect server): package ÷ Structured Streaming "
        "(AvailableNow), records/s | 1.60x | ≥ 1.5 | yes |"
    )
    assert "| cross-mode (package on a warm Connect server, AvailableNow by spark-submit with its JVM start): " in (
        markdown
    )
    assert "package ÷ Structured Streaming, records/s | 2.50x | - | - |" in markdown
    assert "the hand-written Python consumer, records/s | 0.50x | ≥ 1.5 | no |" in markdown
    assert "AvailableNow + checkpoint, on the same warm Spark Connect server" in markdown


def test_same_mode_ratios_are_given_round_by_round_with_their_spread() -> None:
    runs = {
        "package_connect": [{"seconds": 4.0}, {"seconds": 5.0}, {"seconds": 8.0}],
        "structured_streaming_connect": [{"seconds": 6.0}, {"seconds": 6.0}, {"seconds": 6.0}],
        "python_consumer": [{"seconds": 7.0}, {"seconds": 7.0}, {"seconds": 7.0}],
        "structured_streaming": [{"seconds": 20.0}],  # its package contender did not run
    }
    ratios = round_ratios(runs)
    assert ratios == {
        "package_connect_vs_structured_streaming_connect": [1.5, 1.2, 0.75],
        "package_connect_vs_python_consumer": [1.75, 1.4, 0.875],
    }
    run = results()
    run["throughput"].update(warmup=1, round_ratios=ratios)
    markdown = render(run)
    assert "Every contender ran 1 untimed time(s) first (warm-up), then the timed runs in turn." in markdown
    assert (
        "airflow-kafka-offsets batch on a warm Spark Connect server (plan + read + commit) ÷ Spark Structured "
        "Streaming, AvailableNow + checkpoint, on the same warm Spark Connect server, records/s, round by round: "
        "1.50x, 1.20x, 0.75x (median 1.20x, 0.75-1.50x)"
    ) in markdown
