"""Manual operations on an ingestion pipeline, from the Airflow UI's trigger form.

- **status**: committed offsets, Kafka's log start/end, lag in records and time, recent batches,
  any batch in flight.
- **replay**: re-read committed batches (by batch numbers, offset ranges or a time window) and
  rebuild their output in place or under another root. The cursor does not move.
- **reset**: move the cursor like `kafka-consumer-groups --reset-offsets` (dry run by default).
  Refused while a batch is planned; the skipped or rewound span is recorded in the ledger.
- **catch_up**: drain a backlog as a sequence of capped batches in one run.
- **abort**: give up the planned batch (e.g. its records were deleted before it could be read).

Uses the connections ``kafka_default``, ``postgres_default`` and ``spark_default``.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_kafka_offsets.operators import KafkaPipelineOperationOperator

# Checked by pattern too: jsonschema only enforces format="date-time" when rfc3339-validator is installed.
ISO_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$"

with DAG(
    dag_id="kafka_offsets_manual_ops",
    description="Status, replay, offset reset and catch-up for a Kafka ingestion pipeline",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,
    tags=["kafka", "operations"],
    doc_md=__doc__,
    params={
        "operation": Param("status", type="string", enum=["status", "replay", "reset", "catch_up", "abort"],
                           title="Operation", description="What to do with the pipeline."),
        "pipeline": Param("demo_events", type="string", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
                          title="Pipeline", description="The pipeline's name in the ledger."),
        "replay_first_batch": Param(None, type=["null", "integer"], minimum=1, title="Replay: first batch",
                                    section="Replay"),
        "replay_last_batch": Param(None, type=["null", "integer"], minimum=1, title="Replay: last batch",
                                   section="Replay"),
        "replay_offset_ranges": Param("", type="string", pattern=r"^(|[A-Za-z0-9._-]+:\d+:\d+-\d+(,\s*[A-Za-z0-9._-]+:\d+:\d+-\d+)*)$",
                                      title="Replay: offset ranges",
                                      description="topic:partition:start-end, comma-separated (end exclusive)",
                                      section="Replay"),
        "replay_since": Param(None, type=["null", "string"], format="date-time", pattern=ISO_TIMESTAMP,
                              title="Replay: since",
                              description="Start of a time window (record timestamps)", section="Replay"),
        "replay_until": Param(None, type=["null", "string"], format="date-time", pattern=ISO_TIMESTAMP,
                              title="Replay: until",
                              description="End of the time window (default: now)", section="Replay"),
        "replay_output_root": Param("", type="string", title="Replay: separate output root",
                                    description="Empty: rebuild the batches' outputs in place", section="Replay"),
        "reset_mode": Param("to-latest", type="string",
                            enum=["to-earliest", "to-latest", "to-datetime", "to-offset", "shift-by"],
                            title="Reset: mode", section="Reset"),
        "reset_value": Param("", type="string", title="Reset: value",
                             description="Offset (to-offset), delta (shift-by) or ISO timestamp (to-datetime)",
                             section="Reset"),
        "reset_topic": Param("", type="string", title="Reset: topic", description="Empty: every topic",
                             section="Reset"),
        "reset_partitions": Param("", type="string", pattern=r"^[0-9,\s]*$", title="Reset: partitions",
                                  description="Comma-separated; empty: every partition", section="Reset"),
        "dry_run": Param(True, type="boolean", title="Reset: dry run",
                         description="Show before and after without changing anything", section="Reset"),
        "catch_up_max_batches": Param(10, type="integer", minimum=1, maximum=10000,
                                      title="Catch-up: at most this many batches", section="Catch-up"),
        "abort_reason": Param("", type="string", title="Abort: reason", section="Abort"),
    },
):
    KafkaPipelineOperationOperator(
        task_id="operation",
        operation="{{ params.operation }}",
        pipeline="{{ params.pipeline }}",
        options="{{ params }}",
    )
