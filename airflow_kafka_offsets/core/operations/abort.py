"""abort: give up the planned batch, with a reason for the audit trail."""

from __future__ import annotations

from airflow_kafka_offsets.core.operation_input import Field, Operation, optional_text

OPERATION = Operation("abort", "Abort", "abort the planned batch")
FIELDS: tuple[Field, ...] = (
    OPERATION.field(
        "abort_reason",
        "reason",
        "Recorded in the audit trail (empty: 'aborted by hand').",
        optional_text,
        default="aborted by hand",
        cli="--reason",
    ),
)
