"""abort: give up the planned batch, with a reason for the audit trail."""

from __future__ import annotations

from airflow_kafka_offsets.core.operation_input import Field, Operation, optional_text

OPERATION = Operation("abort", "Abort", "abort the planned batch")
FIELDS: tuple[Field, ...] = (
    Field(
        "abort_reason",
        "Abort: reason",
        "Recorded in the audit trail (empty: 'aborted by hand').",
        (OPERATION.name,),
        optional_text,
        default="aborted by hand",
        section="Abort",
        cli="--reason",
    ),
)
