"""One step of a batch in a process of its own, the way an Airflow task runs it.

    python -m faults_harness.worker plan|read|commit|batch --pipeline P --topic T --output-root DIR
        [--batch-id N] [--ledger-schema S] [--run-id R] [--try-number K] [--max-records N] [--sink JSON]
        [--value-format JSON]

It instantiates the package's operator for the step (``KafkaBatchPlanOperator``,
``KafkaBatchSparkOperator``, ``KafkaBatchCommitOperator``, or for ``batch`` the one-task
``KafkaBatchOperator``, which plans, reads and commits in one process) and calls ``execute``
with a minimal task context, so connections come from the Airflow connection
env vars (``scripts/stack env``) exactly as in a task. The last line on stdout
is ``FAULTS_RESULT <json>`` (what the task would push to XCom); a failure exits
1 after printing ``FAULTS_ERROR <type>: <message>``.

Faults:

- ``AIRFLOW_KAFKA_OFFSETS_CRASH_AT=<point>``: the package's own crash points
  (the process SIGKILLs itself there, see airflow_kafka_offsets/service/faults.py);
- ``FAULTS_PAUSE_AT=<point>[,<point>...]``: the worker stops itself (SIGSTOP)
  at one of those crash points, or at ``before_step``, and carries on when it
  gets SIGCONT. The harness restarts a service meanwhile, or lets a successor
  take over a worker presumed dead.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import traceback
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # imported where used: after the pause points are installed
    from airflow.sdk import Context

    from airflow_kafka_offsets.operators import (
        KafkaBatchCommitOperator,
        KafkaBatchOperator,
        KafkaBatchPlanOperator,
        KafkaBatchSparkOperator,
    )

PAUSE_ENV = "FAULTS_PAUSE_AT"
SPARK_CONF_ENV = "FAULTS_SPARK_CONF"  # JSON object: extra Spark settings for the read step
RESULT_PREFIX = "FAULTS_RESULT "
ERROR_PREFIX = "FAULTS_ERROR "
STEPS = ("plan", "read", "commit", "batch")


def _pause_points() -> frozenset[str]:
    return frozenset(p.strip() for p in os.environ.get(PAUSE_ENV, "").split(",") if p.strip())


def maybe_pause(name: str) -> None:
    if name in _pause_points():
        print(f"faults worker {os.getpid()}: pausing at {name}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        print(f"faults worker {os.getpid()}: resumed after {name}", file=sys.stderr, flush=True)


def install_pause_points() -> None:
    """Let the package's crash points also pause the process."""
    from airflow_kafka_offsets.service import faults

    faults.check_crash_env()
    if _pause_points():
        faults.add_observer(maybe_pause)


def context(args: argparse.Namespace) -> Context:
    """What the steps read of a task's context; outlet events are collected as Airflow's runner does."""
    from airflow.sdk.execution_time.context import OutletEventAccessors

    ti = SimpleNamespace(
        dag_id="faults_harness", run_id=args.run_id, task_id=args.step, try_number=args.try_number, map_index=-1
    )
    # A stand-in for Airflow's context: only the parts the steps read.
    return cast("Context", {"ti": ti, "outlet_events": OutletEventAccessors()})


def operator(
    args: argparse.Namespace,
) -> KafkaBatchPlanOperator | KafkaBatchSparkOperator | KafkaBatchCommitOperator | KafkaBatchOperator:
    from airflow_kafka_offsets.operators import (
        KafkaBatchCommitOperator,
        KafkaBatchOperator,
        KafkaBatchPlanOperator,
        KafkaBatchSparkOperator,
    )

    common: dict[str, Any] = {"task_id": args.step, "pipeline": args.pipeline, "ledger_schema": args.ledger_schema}
    plan = {
        "topics": [args.topic],
        "output_root": args.output_root,
        "sink": json.loads(args.sink) if args.sink else None,
        "max_records_per_batch": args.max_records,
        "value_format": json.loads(args.value_format) if args.value_format else None,
        "json_schema": args.json_schema,
        "keep_raw_value": args.keep_raw_value,
    }
    spark_conf = json.loads(os.environ.get(SPARK_CONF_ENV) or "{}")
    if args.step == "plan":
        return KafkaBatchPlanOperator(**plan, **common)
    if args.step == "read":
        return KafkaBatchSparkOperator(batch_id=args.batch_id, spark_conf=spark_conf, **common)
    if args.step == "batch":
        return KafkaBatchOperator(spark_conf=spark_conf, **plan, **common)
    return KafkaBatchCommitOperator(batch_id=args.batch_id, **common)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one step of a batch (or all: batch) like an Airflow task")
    parser.add_argument("step", choices=STEPS)
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output-root", required=True)
    parser.add_argument("--ledger-schema", default="kafka_offsets")
    parser.add_argument("--batch-id", type=int, default=None)
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument("--run-id", default="manual")
    parser.add_argument("--try-number", type=int, default=1)
    parser.add_argument("--sink", default=None, help="the plan step's sink option as JSON (default: directories)")
    parser.add_argument("--value-format", default=None, help="the plan step's value_format as JSON (Avro values)")
    parser.add_argument("--json-schema", default=None, help="the plan step's json_schema (mirror tables)")
    parser.add_argument("--keep-raw-value", default=None, help="the plan step's keep_raw_value (true or false)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    try:
        install_pause_points()
        task = operator(args)
        maybe_pause("before_step")
        result = task.execute(context(args))
    except Exception as exc:  # a failed task: its type and message are what the harness reports
        traceback.print_exc()
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"{ERROR_PREFIX}{message[:2000]}", flush=True)
        return 1
    print(f"{RESULT_PREFIX}{json.dumps(result, sort_keys=True, default=str)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
