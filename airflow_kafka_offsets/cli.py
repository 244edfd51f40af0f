"""``airflow-kafka-offsets``: status, replay, reset, catch-up, abort and sweep from a shell.

Connections come from Airflow (``--kafka-conn-id``, ``--postgres-conn-id``,
``--spark-conn-id``), as for the operators. Tables by default, ``--json`` for machines.
Subcommands and options come from the shared field definitions
(:mod:`airflow_kafka_offsets.core.operation_fields`); logs always go to stderr, so stdout holds
only the result.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from airflow_kafka_offsets.core.operation_fields import FIELDS, OPERATIONS, OperationRequest, operation, parse_request
from airflow_kafka_offsets.core.resets import ResetMode
from airflow_kafka_offsets.errors import KafkaOffsetsError


def _actor(command: str) -> dict[str, Any]:
    return {"cli": command, "user": os.environ.get("USER"), "hostname": socket.gethostname(), "pid": os.getpid()}


def _command(operation: str) -> str:
    return operation.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-kafka-offsets", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("pipeline")
    common.add_argument("--kafka-conn-id", default="kafka_default")
    common.add_argument("--postgres-conn-id", default="postgres_default")
    common.add_argument("--ledger-schema", default=None, help="default: [kafka_offsets] ledger_schema")
    common.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    spark = argparse.ArgumentParser(add_help=False)
    spark.add_argument("--spark-conn-id", default="spark_default")
    spark.add_argument("--spark-jars", default=None, help="default: [kafka_offsets] spark_jars")

    sub = parser.add_subparsers(dest="command", required=True)
    for op in OPERATIONS:
        cmd = sub.add_parser(_command(op.name), parents=[common, spark] if op.uses_spark else [common], help=op.help)
        cmd.set_defaults(operation=op.name)
        for field in FIELDS:
            if field.cli and op.name in field.operations:
                cmd.add_argument(field.cli, dest=field.name, help=field.description)
        if op.name == "reset":
            mode = cmd.add_mutually_exclusive_group(required=True)
            for reset_mode in ResetMode:
                if reset_mode.takes_value:
                    mode.add_argument(f"--{reset_mode.value}", dest=f"reset_value_{reset_mode.name}", metavar="VALUE")
                else:
                    mode.add_argument(
                        f"--{reset_mode.value}", dest="reset_mode", action="store_const", const=reset_mode.value
                    )
        if "dry_run" in (f.name for f in FIELDS if op.name in f.operations):
            cmd.add_argument("--execute", action="store_true", help=f"apply the {_command(op.name)} (default: dry run)")
    return parser


def request_from_args(args: argparse.Namespace) -> OperationRequest:
    """The CLI's options through the same field rules as the form; messages name the options."""
    raw: dict[str, Any] = {"operation": args.operation, "pipeline": args.pipeline}
    raw.update({f.name: getattr(args, f.name) for f in FIELDS if f.cli and hasattr(args, f.name)})
    labels = {f.name: f.cli for f in FIELDS if f.cli}
    if args.operation == "reset":
        raw["reset_mode"] = getattr(args, "reset_mode", None)
        for reset_mode in ResetMode:
            value = getattr(args, f"reset_value_{reset_mode.name}", None)
            if value is not None:
                raw["reset_mode"], raw["reset_value"] = reset_mode.value, value
                labels["reset_value"] = f"--{reset_mode.value}"
    if hasattr(args, "execute"):
        raw["dry_run"] = not args.execute
    return parse_request(raw, labels)


def run(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    request = request_from_args(args)
    # Imported here, so that --help and bad input answer without loading Airflow.
    from airflow_kafka_offsets.clients.spark_submit import SparkBatchSubmitter
    from airflow_kafka_offsets.config import ledger_schema, spark_settings
    from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook
    from airflow_kafka_offsets.service.commands import OperationContext, run_operation

    ledger = LedgerHook(args.postgres_conn_id, ledger_schema(args.ledger_schema)).get_conn()
    kafka_hook = KafkaClusterHook(args.kafka_conn_id)
    submit, properties = None, {}
    if operation(request.operation).uses_spark:
        with ledger.transaction() as tx:
            output_root = tx.output_root(request.pipeline)
        submit = SparkBatchSubmitter(spark_settings(args.spark_conn_id, jars=args.spark_jars, output_root=output_root))
        properties = kafka_hook.spark_properties()
    ctx = OperationContext(ledger, kafka_hook.get_conn(), _actor(args.command), submit, properties)
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if not args.json else logging.WARNING, format="%(message)s", stream=sys.stderr
    )
    with stdout_for_results_only() as out:
        try:
            data, text = run(args)
        except (KafkaOffsetsError, ValueError) as exc:
            print(f"airflow-kafka-offsets {args.command}: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(data, indent=2, default=str) if args.json else text, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
