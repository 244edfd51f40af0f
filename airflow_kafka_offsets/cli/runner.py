"""Running one operation from a shell: connections from Airflow, one result on stdout.

Both shells (``airflow-kafka-offsets`` and ``airflow kafka-offsets``) end here, so they print the
same text and the same ``--json`` document, and fail the same way (exit status 2, the message on
stderr). Spark's log goes to a file named at the end, unless ``--verbose``: a terminal shows the
progress lines of the package and, on failure, one message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from airflow_kafka_offsets.cli.arguments import command_name, request_from_args
from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.spark.options import SparkJobOptions


def spark_log_file(args: argparse.Namespace) -> str | None:
    """Where spark-submit's output goes: a new private file, unless ``--verbose`` (then stderr) or the
    command runs no Spark."""
    if not hasattr(args, "verbose") or args.verbose:
        return None
    fd, path = tempfile.mkstemp(prefix=f"airflow-kafka-offsets-{command_name(args.operation)}-", suffix=".log")
    os.close(fd)
    return path


def run(args: argparse.Namespace, log_file: str | None = None) -> tuple[dict[str, Any], str]:
    request = request_from_args(args)
    spark = SparkJobOptions.from_params(args)  # only the commands of operations that use Spark have them
    # Imported here, so that --help and bad input answer without loading Airflow's connection code.
    from airflow_kafka_offsets.runtime import AirflowRuntime, cli_actor, spark_runner
    from airflow_kafka_offsets.service.operations import run_operation

    runtime = AirflowRuntime(args.kafka_conn_id, args.postgres_conn_id, args.ledger_schema)
    actor = cli_actor(command_name(args.operation))
    ctx = runtime.operation_context(request, actor, lambda output_root: spark_runner(spark, output_root, log_file))
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
    log_file = spark_log_file(args)
    with stdout_for_results_only() as out:
        try:
            try:
                data, text = run(args, log_file)
            finally:
                _name_log_file(log_file, prog, args)
        except (KafkaOffsetsError, ValueError) as exc:
            print(f"{prog} {command_name(args.operation)}: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(data, indent=2, default=str) if args.json else text, file=out)
    return 0


def _name_log_file(log_file: str | None, prog: str, args: argparse.Namespace) -> None:
    """Name Spark's log file on stderr if Spark wrote to it; remove it if no Spark job ran."""
    if log_file is None:
        return
    if os.path.getsize(log_file) == 0:
        os.unlink(log_file)
    else:
        print(
            f"{prog} {command_name(args.operation)}: Spark's log is in {log_file} (--verbose prints it here)",
            file=sys.stderr,
        )
