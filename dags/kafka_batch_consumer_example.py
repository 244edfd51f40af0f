"""Runs once per batch the ``demo_events`` pipeline commits, and reads exactly that batch.

Scheduled on the pipeline's output alias (``kafka_offsets/demo_events``): every commit of
``kafka_ingest_example`` emits one asset event through it, whose ``extra`` names the batch
(pipeline, batch_id, epoch, ranges, records, output_uri). Runs that commit nothing emit nothing,
so nothing runs here. The task looks the batch up in the ledger (``postgres_default``) and reads
its Parquet output with pyarrow.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_kafka_offsets.lineage import pipeline_output_alias

PIPELINE = "demo_events"

with DAG(
    dag_id="kafka_batch_consumer_example",
    description="Reads each batch the demo_events pipeline commits, once",
    schedule=[pipeline_output_alias(PIPELINE)],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["kafka", "assets"],
    doc_md=__doc__,
):

    @task
    def read_committed_batches(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
        """One summary per triggering event: records and offsets per partition of that batch."""
        import pyarrow.parquet as pq

        from airflow_kafka_offsets.config import ledger_schema
        from airflow_kafka_offsets.hooks import LedgerHook
        from airflow_kafka_offsets.readers import committed_output

        ledger = LedgerHook("postgres_default", ledger_schema()).get_conn()
        summaries = []
        # keyed by the alias: the same event is also listed under the output asset itself
        for event in triggering_asset_events[pipeline_output_alias(PIPELINE)]:
            batch = committed_output(ledger, event.extra["pipeline"], int(event.extra["batch_id"]))
            table = pq.read_table(batch.path, columns=["topic", "partition", "offset"])
            stats = table.group_by(["topic", "partition"]).aggregate(
                [("offset", "min"), ("offset", "max"), ("offset", "count")]
            )
            partitions = {
                f"{row['topic']}/{row['partition']}": [row["offset_min"], row["offset_max"], row["offset_count"]]
                for row in stats.to_pylist()
            }
            summaries.append(
                {
                    "pipeline": event.extra["pipeline"],
                    "batch_id": batch.batch_id,
                    "records": table.num_rows,
                    "partitions": partitions,
                }
            )
        return summaries

    read_committed_batches()
