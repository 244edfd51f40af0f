"""Manual operations on an ingestion pipeline, from the Airflow UI's trigger form.

- **status**: committed offsets, Kafka's log start/end, lag in records and time, recent batches,
  any batch in flight.
- **replay**: re-read committed batches (by batch numbers, offset ranges or a time window) and
  rebuild their output in place or under another root. The cursor does not move.
- **reset**: move the cursor like `kafka-consumer-groups --reset-offsets` (dry run by default).
  Refused while a batch is planned; the skipped or rewound span is recorded in the ledger.
- **catch_up**: drain a backlog as a sequence of capped batches in one run.
- **abort**: give up the planned batch (e.g. its records were deleted before it could be read).
- **sweep**: remove the staging of dead attempts and the output of aborted batches (dry run by
  default); never touches a live attempt.

**Approvals**: with *Require approval* on, a reset or change-spec with dry run off, and an
abort, wait in Airflow's *Required actions* for a person to approve their dry run (the table of
before and after); approved, the operation applies exactly that (a change in between refuses it,
and the approval task fails showing what it would now do), and the ledger's audit row names the
approver and the digest approved; rejected, or not answered within an hour, nothing changes.

Only the fields of the chosen operation are read; the others may stay empty. Empty means
"every topic" / "every partition" / "in place" where the field says so.

Uses the connections ``kafka_default``, ``postgres_default`` and ``spark_default``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param

from airflow_kafka_offsets.core.operation_fields import form_fields
from airflow_kafka_offsets.operators import (
    KafkaOperationApprovalOperator,
    KafkaOperationPreviewOperator,
    KafkaPipelineOperationOperator,
)

OPERATION = {"operation": "{{ params.operation }}", "pipeline": "{{ params.pipeline }}", "options": "{{ params }}"}

with DAG(
    dag_id="kafka_offsets_manual_ops",
    description="Status, replay, offset reset, catch-up, abort and sweep for a Kafka ingestion pipeline",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,
    tags=["kafka", "operations"],
    doc_md=__doc__,
    # One definition per field (core/operation_fields.py), shared with the operator and the CLI:
    # optional fields accept null, so only the operation and the pipeline are required.
    params={
        **{field.name: Param(**field.param_kwargs()) for field in form_fields()},
        "require_approval": Param(
            False,
            type=["boolean", "null"],  # a cleared field: no approval
            title="Require approval",
            description="Reset and change-spec (dry run off) and abort wait for an approval of their dry run.",
        ),
    },
):
    (
        KafkaOperationPreviewOperator(task_id="preview", require_approval="{{ params.require_approval }}", **OPERATION)
        >> KafkaOperationApprovalOperator(task_id="approval", response_timeout=timedelta(hours=1))
        >> KafkaPipelineOperationOperator(
            task_id="operation",
            approved_digest="{{ ti.xcom_pull(task_ids='preview')['digest'] }}",
            approved_by="{{ (ti.xcom_pull(task_ids='approval') or {}).get('responded_by_user') }}",
            **OPERATION,
        )
    )
