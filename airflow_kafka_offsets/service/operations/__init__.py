"""One module per manual operation, each the service side of its :mod:`airflow_kafka_offsets.core.operations`
module: the work on the ledger, Kafka, Spark and the sink, and ``handle``, which turns the operation's
validated request into an :class:`~airflow_kafka_offsets.service.operations.result.OperationResult`
(the same data and text for the CLI, the operator and the trigger form's run).

:func:`run_operation` dispatches through :data:`HANDLERS`, built from these modules by the operation
each names; a new operation is a module in ``core.operations`` (its fields and request) and one here
(its handler), each listed once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType

from airflow_kafka_offsets.core.operation_fields import OperationRequest
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.operations import abort, catch_up, change_spec, replay, reset, status, sweep
from airflow_kafka_offsets.service.operations.result import OperationResult

__all__ = ["HANDLERS", "OperationResult", "run_operation"]

Handler = Callable[[OperationRequest, OperationContext], OperationResult]

MODULES: tuple[ModuleType, ...] = (status, replay, reset, catch_up, abort, change_spec, sweep)
HANDLERS: Mapping[str, Handler] = {m.OPERATION.name: m.handle for m in MODULES}


def run_operation(request: OperationRequest, ctx: OperationContext) -> OperationResult:
    return HANDLERS[request.operation](request, ctx)
