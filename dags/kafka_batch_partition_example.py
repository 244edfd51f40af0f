"""One run per batch the ``demo_events`` pipeline commits, keyed by the batch: Airflow's partitioned
asset events (Airflow 3.3 and later).

Every commit of ``kafka_ingest_example`` also emits an event on the asset
``kafka-offsets://demo_events/batches`` whose partition key names the batch (``batch=000000000042``,
as its output directory is named). Scheduled with ``PartitionedAssetTimetable``, this DAG gets one
run per committed batch with that key as the run's ``partition_key``, so the Airflow UI lists runs
by batch and re-running one batch's downstream work is clearing that one run. The task looks the
batch up in the ledger (``postgres_default``) and reads its Parquet output with pyarrow. On an Airflow
without partitioned asset events (before 3.3) the DAG is not defined.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_kafka_offsets.airflow_features import available
from airflow_kafka_offsets.lineage import pipeline_batches_asset

PIPELINE = "demo_events"


def define_dag() -> DAG:
    from airflow.sdk import PartitionedAssetTimetable

    with DAG(
        dag_id="kafka_batch_partition_example",
        description="One run per batch the demo_events pipeline commits, keyed by the batch",
        schedule=PartitionedAssetTimetable(assets=pipeline_batches_asset(PIPELINE)),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["kafka", "assets", "partitions"],
        doc_md=__doc__,
    ) as dag:

        @task
        def read_batch(dag_run: Any = None) -> dict[str, Any]:
            """The batch of this run's partition key: its records and offsets per partition."""
            import pyarrow.parquet as pq

            from airflow_kafka_offsets.config import ledger_schema
            from airflow_kafka_offsets.hooks import LedgerHook
            from airflow_kafka_offsets.readers import committed_output

            batch_id = int(dag_run.partition_key.removeprefix("batch="))
            batch = committed_output(LedgerHook("postgres_default", ledger_schema()).get_conn(), PIPELINE, batch_id)
            table = pq.read_table(batch.path, columns=["topic", "partition", "offset"])
            stats = table.group_by(["topic", "partition"]).aggregate([("offset", "min"), ("offset", "max")])
            return {
                "partition_key": dag_run.partition_key,
                "batch_id": batch.batch_id,
                "records": table.num_rows,
                "offsets": {
                    f"{r['topic']}/{r['partition']}": [r["offset_min"], r["offset_max"]] for r in stats.to_pylist()
                },
            }

        read_batch()
    return dag


if available("partitioned_assets"):
    dag = define_dag()
