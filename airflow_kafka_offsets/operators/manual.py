"""One operator for the manual operations (status, replay, reset, catch-up, abort), driven by the
trigger form of ``dags/kafka_offsets_manual_ops.py`` or by any DAG that passes the same options.

The options are validated by the same field definitions as the form and the CLI
(:mod:`airflow_kafka_offsets.core.operation_fields`) and run by the shared dispatcher
(:mod:`airflow_kafka_offsets.service.operations`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from airflow.sdk import Context

from airflow_kafka_offsets.core.actor import with_approval
from airflow_kafka_offsets.core.operation_fields import OperationRequest, parse_request
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator, SparkJobOperator
from airflow_kafka_offsets.runtime import actor_from_context
from airflow_kafka_offsets.service.approval import ApprovalCheck
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations import run_operation
from airflow_kafka_offsets.spark.options import SPARK_TEMPLATE_FIELDS


class KafkaPipelineOperationOperator(SparkJobOperator):
    """Run one manual operation on a pipeline; ``options`` carries the trigger form's fields.

    Replay and catch-up submit Spark jobs with this operator's own Spark settings (the same options
    as the read step's, see :class:`~airflow_kafka_offsets.operators.base.SparkJobOperator`); a
    killed task kills its running spark-submit.

    :param operation: one of the operations in :mod:`airflow_kafka_offsets.core.operation_fields` (templated).
    :param options: the trigger form's fields (or the same keys from any DAG; templated).
    :param approved_digest: the digest of an approved dry run (templated; see
        :class:`~airflow_kafka_offsets.operators.approval.KafkaOperationApprovalOperator`): the
        operation then applies only what that dry run showed, else it is refused with nothing changed.
    :param approved_by: who approved it (templated): Airflow's ``responded_by_user`` (``{"id", "name"}``)
        or a name. The ledger's audit rows of the operation name them and the digest approved.
    """

    template_fields: Sequence[str] = (
        *KafkaOffsetsBaseOperator.template_fields,
        "operation",
        "options",
        "approved_digest",
        "approved_by",
        *SPARK_TEMPLATE_FIELDS,
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SparkJobOperator.template_fields_renderers,
        "options": "json",
    }
    ui_color = "#f3e8fd"

    def __init__(
        self,
        *,
        operation: str,
        options: Mapping[str, Any] | None = None,
        approved_digest: str | None = None,
        approved_by: Mapping[str, Any] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.operation = operation
        self.options = options
        self.approved_digest = approved_digest
        self.approved_by = approved_by

    def request(self) -> OperationRequest:
        """The rendered options, validated for the operation."""
        return parse_request({**(self.options or {}), "operation": self.operation, "pipeline": self.pipeline})

    def operation_context(self, request: OperationRequest, context: Context) -> OperationContext:
        actor = replace(actor_from_context(context), operation=request.operation)
        return self.runtime().operation_context(request, actor, self.spark_runner)

    def run(self, context: Context) -> dict[str, Any]:
        request = self.request()
        ctx = self.operation_context(request, context)
        if self.approved_digest:
            actor = with_approval(ctx.actor, self.approved_digest, self.approved_by)
            ctx = replace(ctx, approval=ApprovalCheck(self.approved_digest), actor=actor)
        result = run_operation(request, ctx)
        self.log.info("%s of %s:\n%s", request.operation, request.pipeline, result.text)
        return result.data
