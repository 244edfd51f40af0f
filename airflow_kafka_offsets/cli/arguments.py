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
    FIELDS,
    Operation,
    OperationInputError,
    OperationRequest,
    parse_request,
)
from airflow_kafka_offsets.core.resets import ResetMode
from airflow_kafka_offsets.spark.options import cli_options as spark_cli_options


@dataclass(frozen=True)
class Option:
    """One command-line argument: its flags and ``ArgumentParser.add_argument`` keywords."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


RESET_MODE_HELP: Mapping[ResetMode, str] = {
    ResetMode.TO_EARLIEST: "mode (give exactly one): move the cursor to each partition's log start",
    ResetMode.TO_LATEST: "mode: move the cursor to each partition's log end",
    ResetMode.TO_DATETIME: "mode: move the cursor to the first record at or after this ISO 8601 time",
    ResetMode.TO_OFFSET: "mode: move the cursor to this offset",
    ResetMode.SHIFT_BY: "mode: move the cursor by this many records (negative: back)",
}


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
    if op.name == "reset":
        options += [
            Option(
                (f"--{mode.value}",),
                {"dest": f"reset_{mode.name}", "help": RESET_MODE_HELP[mode]}
                | ({"metavar": "VALUE"} if mode.takes_value else {"action": "store_true"}),
            )
            for mode in ResetMode
        ]
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


def _reset_mode(args: argparse.Namespace) -> tuple[ResetMode, str | None]:
    """The one reset mode given (with its value); naming all of them when none or several are."""
    given: list[tuple[ResetMode, str | None]] = []
    for mode in ResetMode:
        value = getattr(args, f"reset_{mode.name}", None)
        if mode.takes_value and value is not None:
            given.append((mode, value))
        elif not mode.takes_value and value:
            given.append((mode, None))
    if len(given) != 1:
        choices = ", ".join(f"--{mode.value}" + (" VALUE" if mode.takes_value else "") for mode in ResetMode)
        got = " and ".join(f"--{mode.value}" for mode, _ in given) or "none"
        raise OperationInputError(f"give exactly one reset mode: {choices}; got {got}")
    return given[0]


def request_from_args(args: argparse.Namespace) -> OperationRequest:
    """The command's options through the same field rules as the form; messages name the options."""
    raw: dict[str, Any] = {"operation": args.operation, "pipeline": args.pipeline}
    raw.update({f.name: getattr(args, f.name) for f in FIELDS if f.cli and hasattr(args, f.name)})
    labels = {f.name: f.cli for f in FIELDS if f.cli}
    if args.operation == "reset":
        mode, value = _reset_mode(args)
        raw["reset_mode"], raw["reset_value"] = mode.value, value
        labels["reset_value"] = f"--{mode.value}"
    if hasattr(args, "execute"):
        raw["dry_run"] = not args.execute
    return parse_request(raw, labels)
