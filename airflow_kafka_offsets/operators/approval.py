"""Approvals of destructive manual operations in Airflow's human-in-the-loop UI.

Three tasks: :class:`KafkaOperationPreviewOperator` runs the operation's dry run (reset and
change-spec with dry run off, abort) and keeps its table and digest;
:class:`KafkaOperationApprovalOperator` asks for an approval showing that table (Airflow's
"Required actions"); the operation task then runs with the approved digest and the approver
(:class:`~airflow_kafka_offsets.operators.manual.KafkaPipelineOperationOperator`'s
``approved_digest`` and ``approved_by``) and applies only what the dry run showed, naming both in
the ledger's audit row. Approved when the dry run no longer matches (records arrived, a batch was
planned), the approval task itself fails with :class:`~airflow_kafka_offsets.errors.ApprovalMismatchError`
showing what it would now do, so the refusal is where the approver looks. Rejected, the operation
task is skipped; not answered in time, the approval fails and the operation task never runs. Either
way nothing changes. Operations that change nothing (status, dry runs) pass without a question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Context

from airflow_kafka_offsets.core.operation_fields import parse_request
from airflow_kafka_offsets.core.operation_input import is_blank, parse_bool
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.operators.base import AirflowFailException
from airflow_kafka_offsets.operators.manual import KafkaPipelineOperationOperator
from airflow_kafka_offsets.runtime import AirflowRuntime, actor_from_context
from airflow_kafka_offsets.service.approval import approval_refused, needs_approval, preview
from airflow_kafka_offsets.spark.runner import BatchRunner


class KafkaOperationPreviewOperator(KafkaPipelineOperationOperator):
    """The dry run to approve, as XCom: ``{"required": bool, "table": str, "digest": str, ...}``.

    :param require_approval: whether a destructive operation waits for an approval (templated).
    """

    template_fields: Sequence[str] = (*KafkaPipelineOperationOperator.template_fields, "require_approval")

    def __init__(self, *, require_approval: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.require_approval = require_approval

    def run(self, context: Context) -> dict[str, Any]:
        request = self.request()
        required = not is_blank(self.require_approval) and parse_bool(self.require_approval)
        if not (required and needs_approval(request)):
            return {"required": False, "digest": None}
        shown = preview(request, self.operation_context(request, context))
        self.log.info("%s of %s waits for an approval of:\n%s", shown.operation, shown.pipeline, shown.table)
        return {
            "required": True,
            "operation": shown.operation,
            "pipeline": shown.pipeline,
            "table": shown.table,
            "digest": shown.digest,
            # what the approval needs to run the same dry run again when the answer comes
            "options": dict(self.options or {}),
            "connections": {
                "kafka_conn_id": self.kafka_conn_id,
                "postgres_conn_id": self.postgres_conn_id,
                "ledger_schema": self.ledger_schema,
            },
        }


class KafkaOperationApprovalOperator(ApprovalOperator):
    """Approve or reject the dry run of ``preview_task_id`` in Airflow's UI; passes at once when the
    preview needs no approval. Without an answer within ``response_timeout`` the task fails.

    Approved, the dry run runs again: when it no longer shows what was approved the task fails
    (:class:`~airflow_kafka_offsets.errors.ApprovalMismatchError`, with what it would now do). Its
    XCom is Airflow's answer (``chosen_options``, ``responded_by_user``, ``responded_at``) with the
    ``approved_digest``.
    """

    def __init__(
        self, *, preview_task_id: str = "preview", response_timeout: timedelta = timedelta(hours=1), **kwargs: Any
    ) -> None:
        kwargs.setdefault("subject", "Approve a manual operation on a Kafka pipeline")
        super().__init__(response_timeout=response_timeout, **kwargs)
        self.preview_task_id = preview_task_id

    def execute(self, context: Context) -> Any:
        shown = context["ti"].xcom_pull(task_ids=self.preview_task_id)
        if not shown or not shown.get("required"):
            self.log.info("nothing to approve: the operation changes nothing or needs no approval")
            return None
        name = str(shown["operation"]).replace("_", "-")
        self.subject = f"Approve {name} of pipeline {shown['pipeline']}?"
        self.body = approval_body(name, shown["table"], shown["digest"])
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        answer = super().execute_complete(context, event)
        if answer["chosen_options"] != [self.APPROVE]:
            return answer
        shown = context["ti"].xcom_pull(task_ids=self.preview_task_id)
        request = parse_request({**shown["options"], "operation": shown["operation"], "pipeline": shown["pipeline"]})
        runtime = AirflowRuntime(**shown["connections"])
        now = preview(request, runtime.operation_context(request, actor_from_context(context), _no_spark))
        if now.digest != shown["digest"]:
            user = answer.get("responded_by_user") or {}
            exc = approval_refused(now, user.get("name"))
            self.log.error("%s", exc)
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
        return {**answer, "approved_digest": shown["digest"]}


def _no_spark(output_root: str) -> BatchRunner:
    """An approval's dry run (reset, change-spec, abort) submits no Spark job."""
    raise ConfigurationError(f"an approval's dry run runs no Spark job (asked for one writing to {output_root})")


def markdown_table(table: str) -> str:
    """A table of :func:`~airflow_kafka_offsets.core.tables.render_table` in Markdown, cut at its
    rule's columns (a cell may hold spaces, or nothing)."""
    lines = table.splitlines()
    starts = [m.start() for m in re.finditer(r"-+", lines[1])]
    spans = list(zip(starts, [*starts[1:], None]))

    def row(line: str) -> str:
        cells = [line[a:b].strip() for a, b in spans]
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([row(lines[0]), "|" + "---|" * len(spans), *(row(line) for line in lines[2:])])


def approval_body(operation: str, table: str, digest: str) -> str:
    """The question in Markdown: the dry run's table, exactly as the approved run must find it."""
    return (
        f"The dry run of **{operation}** shows what it will do:\n\n{markdown_table(table)}\n\n"
        "Approve: the operation runs and applies exactly this; if anything changed since (records arrived, "
        "a batch was planned, the spec changed) it is refused and nothing changes. Reject: nothing changes.\n\n"
        f"Dry run digest: `{digest[:16]}`"
    )
