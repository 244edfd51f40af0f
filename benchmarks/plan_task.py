"""The plan task's own time: ``KafkaBatchPlanOperator.execute`` in a new process, as a worker runs it.

Each timed plan runs in a fresh Python process (a task is one), after the imports a DAG file's
parse brings (Airflow's SDK and the operator's module) and before anything the task itself loads:
the Spark check, the ledger's connection and hook, Kafka's offsets, the plan's transaction. Three
cases on a topic of ``--partitions`` partitions, for each Spark connection:

- ``new``: the first plan of a pipeline (its cursors are created from Kafka's offsets);
- ``steady``: the next plan of a pipeline with committed batches;
- ``replanned``: a plan task retried while its batch is planned (it returns that batch).

Between plans, batches are committed in this process through the package's own ``run_batch`` and
``commit_batch`` with a stand-in for Spark that stages a matching report (no records are read:
only the plan is timed). Run alone: ``python -m benchmarks.plan_task --help`` (scripts/bench's
``--only plan`` runs it too).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import CONNECT_CONN_ID, say
from benchmarks.datagen import produce

CHILD_FLAG = "--child"
CASES = ("new", "steady", "replanned")
SPARK_CONNECTIONS = ("spark_default", CONNECT_CONN_ID)


def child(conn_id: str, pipeline: str, topic: str, output_root: str) -> None:
    """One plan task's execute, timed; prints ``{"execute_ms", "batch_id", "replayed"}``."""
    from airflow.sdk import BaseOperator  # noqa: F401  (loaded before any task runs)

    from airflow_kafka_offsets.operators.plan import KafkaBatchPlanOperator

    logging.disable(logging.WARNING)
    op = KafkaBatchPlanOperator(
        task_id="plan", pipeline=pipeline, topics=[topic], output_root=output_root, spark_conn_id=conn_id
    )
    started = time.perf_counter()
    result = op.execute({})
    elapsed = time.perf_counter() - started
    print(json.dumps({"execute_ms": round(1000 * elapsed, 1), **result}))


def _plan_in_new_process(conn_id: str, pipeline: str, topic: str, output_root: str) -> dict[str, Any]:
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "scripts")])}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.plan_task", CHILD_FLAG, conn_id, pipeline, topic, output_root],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"plan task failed: {done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _commit(pipeline: str, batch_id: int) -> None:
    """Commit a planned batch without reading it: the benchmark times plans, not reads."""
    from airflow_kafka_offsets.core.actor import Actor
    from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, AirflowRuntime
    from airflow_kafka_offsets.service.commit import commit_batch
    from airflow_kafka_offsets.service.plan import load_batch
    from airflow_kafka_offsets.service.read import run_batch
    from benchmarks.scaling import fake_submit

    ledger = AirflowRuntime().ledger()
    sink = AIRFLOW_SINKS.for_pipeline(ledger, pipeline)
    plan = load_batch(ledger, pipeline, batch_id)
    if plan is None:
        raise RuntimeError(f"pipeline {pipeline}: batch {batch_id} is not planned")
    actor = Actor(dag_id="benchmarks", run_id="plan_task")
    run_batch(ledger, sink, plan, fake_submit, {}, actor)
    if not commit_batch(ledger, sink, pipeline, batch_id, actor).committed_now:
        raise RuntimeError(f"pipeline {pipeline}: batch {batch_id} was not committed")


def measure(bootstrap: str, workdir: Path, partitions: int, rounds: int, records: int) -> dict[str, Any]:
    """``rounds`` timed plans of each case and Spark connection; medians in milliseconds."""
    runs: dict[str, dict[str, list[float]]] = {c: {case: [] for case in CASES} for c in SPARK_CONNECTIONS}
    for _ in range(rounds):
        for conn_id in SPARK_CONNECTIONS:
            topic = produce(bootstrap, records, partitions).topic
            pipeline = f"plan_task_{uuid.uuid4().hex[:8]}"
            root = str(workdir / pipeline)
            first = _plan_in_new_process(conn_id, pipeline, topic, root)
            runs[conn_id]["new"].append(first["execute_ms"])
            again = _plan_in_new_process(conn_id, pipeline, topic, root)
            if again["batch_id"] != first["batch_id"] or not again["replayed"]:
                raise RuntimeError(f"a retried plan task planned anew: {first} then {again}")
            runs[conn_id]["replanned"].append(again["execute_ms"])
            _commit(pipeline, first["batch_id"])
            produce(bootstrap, records, partitions, topic=topic)
            steady = _plan_in_new_process(conn_id, pipeline, topic, root)
            if steady["batch_id"] != first["batch_id"] + 1 or steady["replayed"]:
                raise RuntimeError(f"expected batch {first['batch_id'] + 1} planned anew, got {steady}")
            runs[conn_id]["steady"].append(steady["execute_ms"])
            _commit(pipeline, steady["batch_id"])
            say(f"plan task on {conn_id}: " + ", ".join(f"{c} {runs[conn_id][c][-1]:.0f} ms" for c in CASES))
    return {
        "partitions": partitions,
        "rounds": rounds,
        "median_ms": {
            c: {case: round(statistics.median(v), 1) for case, v in cases.items()} for c, cases in runs.items()
        },
        "runs_ms": runs,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == [CHILD_FLAG]:
        child(*args[1:5])
        return 0
    p = argparse.ArgumentParser(prog="benchmarks.plan_task", description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5, help="timed plans of each case (default 5)")
    p.add_argument("--records", type=int, default=1000, help="records produced before each plan (default 1,000)")
    parsed = p.parse_args(args)
    import tempfile

    import devstack
    from benchmarks.common import prepare_environment

    info = devstack.up(spark_connect_server=True)
    prepare_environment(info)
    with tempfile.TemporaryDirectory(prefix="ako-bench-plan-") as workdir:
        found = measure(info.bootstrap_servers, Path(workdir), parsed.partitions, parsed.rounds, parsed.records)
    print(json.dumps(found["median_ms"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
