"""The options of every operation's command, defined once for both shells.

``airflow-kafka-offsets`` (the console script) adds them to its own argparse parser; ``airflow
kafka-offsets`` turns each into Airflow's ``Arg``. They come from the shared field definitions
(:mod:`airflow_kafka_offsets.core.operation_fields`), and :func:`request_from_args` sends what a
user typed through the same field rules as the trigger form, so messages name the options.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.operation_fields import (
    CLI_INPUTS,
    FIELDS,
    Operation,
    OperationRequest,
    parse_request,
)
from airflow_kafka_offsets.spark.options import cli_options as spark_cli_options


@dataclass(frozen=True)
class Option:
    """One command-line argument: its flags and ``ArgumentParser.add_argument`` keywords."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def command_name(operation: str) -> str:
    """``catch_up`` -> ``catch-up``: the operation's name on a command line."""
    return operation.replace("_", "-")


def _reads_dry_run(op: Operation) -> bool:
    return any(f.name == "dry_run" and op.name in f.operations for f in FIELDS)


def operation_options(op: Operation) -> tuple[Option, ...]:
    """Every argument ``op``'s command takes, in the order ``--help`` lists them."""
    options = [
        Option(("pipeline",), {"help": "the pipeline's name in the ledger"}),
        Option(
            ("--kafka-conn-id",), {"default": DEFAULT_KAFKA_CONN_ID, "help": "Airflow connection of the Kafka cluster"}
        ),
        Option(
            ("--postgres-conn-id",),
            {"default": DEFAULT_POSTGRES_CONN_ID, "help": "Airflow connection of the ledger's PostgreSQL"},
        ),
        Option(("--ledger-schema",), {"default": None, "help": "default: Airflow config kafka_offsets.ledger_schema"}),
        Option(("--json",), {"action": "store_true", "help": "print exactly one JSON document on stdout"}),
    ]
    if op.uses_spark:  # the same Spark options as the operators'
        options += [Option(flags, kwargs) for flags, kwargs in spark_cli_options()]
        options.append(
            Option(
                ("--verbose",),
                {
                    "action": "store_true",
                    "help": "print Spark's log (spark-submit's output) on stderr; default: a progress line per "
                    "batch, the log in a file named at the end",
                },
            )
        )
    options += [
        Option(
            (f.cli,), {"dest": f.name, "metavar": f.cli.lstrip("-").upper().replace("-", "_"), "help": f.description}
        )
        for f in FIELDS
        if f.cli and op.name in f.operations
    ]
    if op.name in CLI_INPUTS:
        options += [Option(flags, kwargs) for flags, kwargs in CLI_INPUTS[op.name].options]
    if _reads_dry_run(op):
        options.append(
            Option(
                ("--execute",),
                {"action": "store_true", "help": f"apply the {command_name(op.name)} (default: dry run)"},
            )
        )
    return tuple(options)


def add_options(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    for option in options:
        parser.add_argument(*option.flags, **option.kwargs)


def request_from_args(args: argparse.Namespace) -> OperationRequest:
    """The command's options through the same field rules as the form; messages name the options."""
    raw: dict[str, Any] = {"operation": args.operation, "pipeline": args.pipeline}
    raw.update({f.name: getattr(args, f.name) for f in FIELDS if f.cli and hasattr(args, f.name)})
    labels = {f.name: f.cli for f in FIELDS if f.cli}
    if args.operation in CLI_INPUTS:
        values, option_labels = CLI_INPUTS[args.operation].read(vars(args))
        raw.update(values)
        labels.update(option_labels)
    if hasattr(args, "execute"):
        raw["dry_run"] = not args.execute
    return parse_request(raw, labels)
