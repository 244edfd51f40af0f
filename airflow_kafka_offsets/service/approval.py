"""Approvals of destructive operations (reset, abort, change-spec): a dry run a person approves, bound
to what it showed.

The dry run's table (before and after per partition, per field, or the planned batch's ranges) is
hashed together with the operation and the pipeline. The approved operation checks that digest
against the table it computes in the same transaction that applies it, so a change in between
(records arrived for a reset to-latest, a batch was planned, the spec changed) refuses it with
nothing changed, instead of applying something nobody saw.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.core.operations.change_spec import spec_changes
from airflow_kafka_offsets.core.operations.reset import reset_request
from airflow_kafka_offsets.core.spec import updated_spec
from airflow_kafka_offsets.core.tables import abort_table
from airflow_kafka_offsets.errors import ApprovalMismatchError, BatchStateError
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations.change_spec import change_spec
from airflow_kafka_offsets.service.operations.reset import reset_offsets

# The operations that change the ledger for good, and when (a dry run changes nothing).
NEEDS_APPROVAL = ("reset", "abort", "change_spec")


def needs_approval(request: OperationRequest) -> bool:
    """Whether the request changes anything: reset and change-spec with dry run off, and abort."""
    if request.operation == "abort":
        return True
    return request.operation in NEEDS_APPROVAL and not request.get("dry_run")


def digest(operation: str, pipeline: str, table: str) -> str:
    """What an approval is bound to: the operation, the pipeline and the dry run's table as shown."""
    shown = json.dumps([operation, pipeline, table], separators=(",", ":"))
    return hashlib.sha256(shown.encode()).hexdigest()


@dataclass(frozen=True)
class Preview:
    """A dry run to approve: its table and the digest the approved run must match."""

    operation: str
    pipeline: str
    table: str
    digest: str


@dataclass(frozen=True)
class ApprovalCheck:
    """The approved digest, checked by the operation inside the transaction that applies it."""

    digest: str

    def check(self, operation: str, pipeline: str, table: str) -> None:
        if digest(operation, pipeline, table) != self.digest:
            raise approval_refused(Preview(operation, pipeline, table, digest(operation, pipeline, table)))


def approval_refused(now: Preview, approved_by: str | None = None) -> ApprovalMismatchError:
    """The refusal of an approval whose dry run now shows ``now``: what it would do instead."""
    by = f" (approved by {approved_by})" if approved_by else ""
    return ApprovalMismatchError(
        f"{now.operation} of pipeline {now.pipeline!r}{by} refused, nothing changed: it would now do something "
        f"other than the dry run that was approved. It would now do:\n{now.table}\nRun it again to approve this."
    )


def preview(request: OperationRequest, ctx: OperationContext) -> Preview:
    """The dry run of ``request`` (one of :data:`NEEDS_APPROVAL`); changes nothing."""
    pipeline = request.pipeline
    if request.operation == "reset":
        table = reset_offsets(ctx, pipeline, reset_request(request.values), dry_run=True).table
    elif request.operation == "change_spec":
        with ctx.ledger.transaction(read_only=True) as tx:
            stored = tx.pipeline_spec(pipeline)
        table = change_spec(ctx, pipeline, updated_spec(stored, spec_changes(request.values)), dry_run=True).table
    else:
        with ctx.ledger.transaction(read_only=True) as tx:
            planned = tx.planned_batch_id(pipeline)
            if planned is None:
                raise BatchStateError(f"pipeline {pipeline!r} has no planned batch to abort")
            table = abort_table(tx.batch(pipeline, planned).plan)
    return Preview(request.operation, pipeline, table, digest(request.operation, pipeline, table))
