"""A Spark run's event log: where its wall clock went (spark-submit start-up, Spark set-up, jobs, shutdown)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def event_log_conf(directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    # Spark 4 rolls and compresses event logs by default; one plain file is easier to read here.
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{directory}",
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
    }


def parse_event_log(directory: Path, submit_start: float, submit_end: float) -> dict[str, Any]:
    """Split one spark-submit's wall clock with the timestamps of its Spark event log (epoch ms)."""
    files = [p for p in directory.iterdir() if p.is_file()]
    if len(files) != 1:
        return {"error": f"expected one event log in {directory}, found {len(files)}"}
    app_start = app_end = None
    jobs: dict[int, dict[str, float]] = {}
    stages = []
    tasks: dict[int, dict[str, float]] = {}
    events: list[tuple[str, float]] = []  # (what, epoch seconds): the timeline profile_setup.py prints
    with open(files[0], encoding="utf-8") as handle:
        for line in handle:
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerApplicationStart":
                app_start = event["Timestamp"] / 1000
                events.append(("SparkContext started (application start)", app_start))
            elif kind == "SparkListenerApplicationEnd":
                app_end = event["Timestamp"] / 1000
                events.append(("application end", app_end))
            elif kind == "SparkListenerJobStart":
                jobs.setdefault(event["Job ID"], {})["start"] = event["Submission Time"] / 1000
                events.append((f"job {event['Job ID']} start", event["Submission Time"] / 1000))
            elif kind == "SparkListenerJobEnd":
                jobs.setdefault(event["Job ID"], {})["end"] = event["Completion Time"] / 1000
                events.append((f"job {event['Job ID']} end", event["Completion Time"] / 1000))
            elif kind == "SparkListenerTaskEnd":
                metrics = event.get("Task Metrics") or {}
                acc = tasks.setdefault(event["Stage ID"], {"run_s": 0.0, "cpu_s": 0.0, "gc_s": 0.0})
                acc["run_s"] += metrics.get("Executor Run Time", 0) / 1000
                acc["cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
                acc["gc_s"] += metrics.get("JVM GC Time", 0) / 1000
            elif kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                if "Submission Time" in info and "Completion Time" in info:
                    what = f"stage {info['Stage ID']} ({info['Number of Tasks']} tasks, {info['Stage Name'][:40]})"
                    events.append((f"{what} submitted", info["Submission Time"] / 1000))
                    events.append((f"{what} completed", info["Completion Time"] / 1000))
                    stages.append(
                        {
                            "stage": info["Stage ID"],
                            "name": info["Stage Name"][:80],
                            "tasks": info["Number of Tasks"],
                            "seconds": round((info["Completion Time"] - info["Submission Time"]) / 1000, 3),
                        }
                    )
    if app_start is None or not jobs:
        return {"error": "event log has no application start or no jobs"}
    first_job = min(j["start"] for j in jobs.values() if "start" in j)
    last_job = max(j["end"] for j in jobs.values() if "end" in j)
    busy = sum(j["end"] - j["start"] for j in jobs.values() if "start" in j and "end" in j)
    return {
        "startup_s": round(app_start - submit_start, 3),  # JVM + Python + SparkContext
        "setup_s": round(first_job - app_start, 3),  # session, checks, Kafka source planning
        "jobs_s": round(last_job - first_job, 3),  # first job submitted -> last job done
        "jobs_busy_s": round(busy, 3),  # time inside jobs (excludes driver gaps)
        "shutdown_s": round(submit_end - last_job, 3),  # report, spark.stop(), JVM exit
        "app_end_to_exit_s": round(submit_end - app_end, 3) if app_end else None,
        "jobs": len(jobs),
        "task_run_s": round(sum(t["run_s"] for t in tasks.values()), 3),  # summed over tasks
        "task_cpu_s": round(sum(t["cpu_s"] for t in tasks.values()), 3),
        "task_gc_s": round(sum(t["gc_s"] for t in tasks.values()), 3),
        "stages": sorted(
            ({**s, **{k: round(v, 3) for k, v in tasks.get(s["stage"], {}).items()}} for s in stages),
            key=lambda s: s["stage"],
        ),
        "events": sorted(events, key=lambda e: e[1]),
    }
