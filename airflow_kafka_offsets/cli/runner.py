"""Running one operation from a shell: connections from Airflow, one result on stdout.

Both shells (``airflow-kafka-offsets`` and ``airflow kafka-offsets``) end here, so they print the
same text and the same ``--json`` document, and fail the same way (exit status 2, the message on
stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from airflow_kafka_offsets.cli.arguments import command_name, request_from_args
from airflow_kafka_offsets.errors import KafkaOffsetsError


def _actor(command: str) -> dict[str, Any]:
    return {"cli": command, "user": os.environ.get("USER"), "hostname": socket.gethostname(), "pid": os.getpid()}


def run(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    request = request_from_args(args)
    # Imported here, so that --help and bad input answer without loading Airflow's connection code.
    from airflow_kafka_offsets.config import ledger_schema, spark_settings
    from airflow_kafka_offsets.core.operation_fields import operation
    from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook
    from airflow_kafka_offsets.hooks.schema_registry import registry_clients
    from airflow_kafka_offsets.service.commands import OperationContext, run_operation
    from airflow_kafka_offsets.spark.runner import batch_runner

    ledger = LedgerHook(args.postgres_conn_id, ledger_schema(args.ledger_schema)).get_conn()
    kafka_hook = KafkaClusterHook(args.kafka_conn_id)
    submit, properties = None, {}
    if operation(request.operation).uses_spark:
        with ledger.transaction() as tx:
            output_root = tx.output_root(request.pipeline)
        submit = batch_runner(spark_settings(args.spark_conn_id, jars=args.spark_jars, output_root=output_root))
        properties = kafka_hook.spark_properties()
    registry = registry_clients(f"for pipeline {request.pipeline}")
    actor = _actor(command_name(args.operation))
    ctx = OperationContext(ledger, kafka_hook.get_conn(), actor, submit, properties, registry)
    result = run_operation(request, ctx)
    return result.data, result.text


@contextmanager
def stdout_for_results_only() -> Iterator[TextIO]:
    """Point file descriptor 1 (Airflow's log handlers, spark-submit's output) at stderr for the
    duration; yield a stream on the original stdout for the one result."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    result = os.fdopen(saved, "w", closefd=True)
    try:
        yield result
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        result.close()


def execute(args: argparse.Namespace, prog: str) -> int:
    """Run the parsed command; print its result (text, or JSON with ``--json``) and return the exit status."""
    with stdout_for_results_only() as out:
        try:
            data, text = run(args)
        except (KafkaOffsetsError, ValueError) as exc:
            print(f"{prog} {command_name(args.operation)}: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(data, indent=2, default=str) if args.json else text, file=out)
    return 0
