"""Running one operation from a shell: connections from Airflow, one result on stdout.

Both shells (``airflow-kafka-offsets`` and ``airflow kafka-offsets``) end here, so they print the
same text and the same ``--json`` document, and fail the same way (exit status 2, the message on
stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from airflow_kafka_offsets.cli.arguments import command_name, request_from_args
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.spark.options import SparkJobOptions


def run(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    request = request_from_args(args)
    spark = SparkJobOptions.from_params(args)  # only the commands of operations that use Spark have them
    # Imported here, so that --help and bad input answer without loading Airflow's connection code.
    from airflow_kafka_offsets.runtime import AirflowRuntime, cli_actor, spark_runner
    from airflow_kafka_offsets.service.operations import run_operation

    runtime = AirflowRuntime(args.kafka_conn_id, args.postgres_conn_id, args.ledger_schema)
    actor = cli_actor(command_name(args.operation))
    ctx = runtime.operation_context(request, actor, lambda output_root: spark_runner(spark, output_root))
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
