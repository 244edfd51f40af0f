"""Two DAGs for the scheduler section of the benchmarks (benchmarks/scheduler_latency.py).

``ako_bench_empty``: one Python task that does nothing, the floor a real scheduler and executor
put under any one-task run. ``ako_bench_one_task``: one batch with ``KafkaBatchOperator`` (plan,
read and commit in one task), its pipeline, topic, output and Spark connection from the run's
conf. Neither is scheduled: the benchmark triggers runs, and the scheduler queues and runs them
as it runs scheduled ones. The local stack's Airflow loads this folder as a second DAG bundle.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_kafka_offsets.operators import KafkaBatchOperator

with DAG(dag_id="ako_bench_empty", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["benchmark"]):

    @task(task_id="nothing")
    def nothing() -> None:
        """A task process that starts, runs no code of its own and ends."""

    nothing()

with DAG(
    dag_id="ako_bench_one_task",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=64,  # each run names its own pipeline (the scale section runs many at once)
    params={"pipeline": "bench", "topic": "bench", "output_root": "/tmp/ako-bench", "spark_conn_id": "spark_default"},
    tags=["benchmark"],
):
    KafkaBatchOperator(
        task_id="batch",
        pipeline="{{ params.pipeline }}",
        topics="{{ params.topic }}",
        output_root="{{ params.output_root }}",
        spark_conn_id="{{ params.spark_conn_id }}",
    )
