"""``airflow-kafka-offsets``: status, replay, reset, catch-up and abort from a shell.

Connections come from Airflow (``--kafka-conn-id``, ``--postgres-conn-id``,
``--spark-conn-id``), as for the operators. Tables by default, ``--json`` for machines.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from airflow_kafka_offsets.errors import KafkaOffsetsError


def _actor(command: str) -> dict[str, Any]:
    return {"cli": command, "user": os.environ.get("USER"), "hostname": socket.gethostname(), "pid": os.getpid()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-kafka-offsets", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("pipeline")
    common.add_argument("--kafka-conn-id", default="kafka_default")
    common.add_argument("--postgres-conn-id", default="postgres_default")
    common.add_argument("--ledger-schema", default=None, help="default: [kafka_offsets] ledger_schema")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    spark = argparse.ArgumentParser(add_help=False)
    spark.add_argument("--spark-conn-id", default="spark_default")
    spark.add_argument("--spark-jars", default=None, help="default: [kafka_offsets] spark_jars")

    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status", parents=[common], help="offsets, lag and recent batches")

    replay = sub.add_parser("replay", parents=[common, spark], help="rebuild committed batches' output")
    replay.add_argument("--batches", help="FIRST[-LAST] batch numbers")
    replay.add_argument("--offsets", help="topic:partition:start-end[,...]")
    replay.add_argument("--since", help="ISO timestamp: start of a time window")
    replay.add_argument("--until", help="ISO timestamp: end of the time window (default now)")
    replay.add_argument("--output-root", help="rebuild under this root instead of in place")

    reset = sub.add_parser("reset", parents=[common], help="move the cursor (dry run unless --execute)")
    mode = reset.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true")
    mode.add_argument("--to-latest", action="store_true")
    mode.add_argument("--to-datetime")
    mode.add_argument("--to-offset", type=int)
    mode.add_argument("--shift-by", type=int)
    reset.add_argument("--topic")
    reset.add_argument("--partitions", help="comma-separated partition numbers")
    reset.add_argument("--execute", action="store_true", help="apply the reset (default: dry run)")

    catch = sub.add_parser("catch-up", parents=[common, spark], help="drain a backlog in capped batches")
    catch.add_argument("--max-batches", type=int, default=10)

    abort = sub.add_parser("abort", parents=[common], help="abort the planned batch")
    abort.add_argument("--reason", default="aborted from the CLI")
    return parser


def _reset_args(args: argparse.Namespace) -> tuple[str, Any]:
    for mode in ("to_earliest", "to_latest"):
        if getattr(args, mode):
            return mode.replace("_", "-"), None
    for mode in ("to_datetime", "to_offset", "shift_by"):
        if getattr(args, mode) is not None:
            return mode.replace("_", "-"), getattr(args, mode)
    raise AssertionError("argparse requires a mode")


def run(args: argparse.Namespace) -> tuple[Any, str]:
    from airflow_kafka_offsets.service import operations as ops
    from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook
    from airflow_kafka_offsets.config import ledger_schema, spark_settings
    from airflow_kafka_offsets.core.resets import build_reset_request, parse_datetime
    from airflow_kafka_offsets.clients.spark_submit import SparkBatchSubmitter

    ledger = LedgerHook(args.postgres_conn_id, ledger_schema(args.ledger_schema)).get_conn()
    kafka_hook = KafkaClusterHook(args.kafka_conn_id)
    kafka = kafka_hook.get_conn()
    actor = _actor(args.command)
    if args.command == "status":
        status = ops.pipeline_status(ledger, kafka, args.pipeline)
        return status, ops.render_status(status)
    if args.command == "reset":
        mode, value = _reset_args(args)
        request = build_reset_request(mode, value, args.topic, args.partitions)
        outcome = ops.reset_offsets(ledger, kafka, args.pipeline, request, actor, dry_run=not args.execute)
        if outcome.applied:
            ops.mirror_to_consumer_group(ledger, kafka, args.pipeline)
        head = f"applied as batch {outcome.batch_id}" if outcome.applied else "dry run: nothing changed (add --execute)"
        return {"applied": outcome.applied, "batch_id": outcome.batch_id, "changes": list(outcome.changes)}, (
            f"reset {args.pipeline} {mode}: {head}\n{outcome.table}")
    if args.command == "abort":
        batch_id = ops.abort_planned_batch(ledger, args.pipeline, args.reason, actor)
        return {"aborted": batch_id}, f"aborted batch {batch_id} of {args.pipeline}"

    submit = SparkBatchSubmitter(spark_settings(args.spark_conn_id, jars=args.spark_jars))
    properties = kafka_hook.spark_properties()
    if args.command == "replay":
        first = last = None
        if args.batches:
            first_text, _, last_text = args.batches.partition("-")
            first, last = int(first_text), int(last_text or first_text)
        selection = ops.ReplaySelection(
            first_batch=first, last_batch=last, offset_ranges=ops.parse_offset_ranges(args.offsets),
            since=parse_datetime(args.since) if args.since else None,
            until=parse_datetime(args.until) if args.until else None,
        )
        batch_ids = ops.resolve_replay(ledger, kafka, args.pipeline, selection)
        outputs = [ops.replay_batch(ledger, args.pipeline, b, submit, properties, actor, args.output_root)
                   for b in batch_ids]
        return {"replayed": batch_ids, "outputs": outputs}, "\n".join(
            f"replayed batch {b} -> {o}" for b, o in zip(batch_ids, outputs))
    outcome = ops.catch_up(ledger, args.pipeline, kafka.offsets, submit, properties, actor, args.max_batches,
                           after_commit=lambda: ops.mirror_to_consumer_group(ledger, kafka, args.pipeline))
    data = {"batches": outcome.batches, "records": outcome.records, "lag_left": outcome.lag_left}
    return data, f"catch-up {args.pipeline}: {outcome.batches} batches, {outcome.records} records, lag left {outcome.lag_left}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if not args.json else logging.WARNING, format="%(message)s")
    try:
        data, text = run(args)
    except (KafkaOffsetsError, ValueError) as exc:
        print(f"airflow-kafka-offsets {args.command}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2, default=str) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
