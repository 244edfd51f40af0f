"""status: offsets, lag and recent batches; it reads nothing but the pipeline."""

from __future__ import annotations

from airflow_kafka_offsets.core.operation_input import Field, Operation

OPERATION = Operation("status", "Status", "offsets, lag and recent batches")
FIELDS: tuple[Field, ...] = ()
