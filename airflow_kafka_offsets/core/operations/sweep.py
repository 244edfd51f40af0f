"""sweep: remove the staging of dead attempts and the output of aborted batches (dry run first)."""

from __future__ import annotations

from airflow_kafka_offsets.core.operation_input import Field, Operation

OPERATION = Operation(
    "sweep",
    "Sweep",
    "remove staging of dead attempts and output of aborted batches (a dry run unless told to apply it)",
)
FIELDS: tuple[Field, ...] = ()  # the dry-run switch only
