"""``airflow kafka-offsets ...``: the operations as a group of Airflow's own CLI.

Listed in ``get_provider_info()["cli"]``; Airflow (3.2 and later) imports this module and calls
:func:`get_cli_commands` on every ``airflow`` invocation, even ``airflow --help``, so it only
describes the commands. Connections, the ledger and Spark load when one of them runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from airflow.cli.cli_config import ActionCommand, Arg, CLICommand, GroupCommand

from airflow_kafka_offsets.cli.arguments import command_name, operation_options
from airflow_kafka_offsets.core.operation_fields import OPERATIONS, Operation

GROUP = "kafka-offsets"
PROG = f"airflow {GROUP}"


def _runner(op: Operation) -> Callable[[argparse.Namespace], None]:
    def run_command(args: argparse.Namespace) -> None:
        from airflow_kafka_offsets.cli.runner import execute

        args.operation = op.name
        status = execute(args, PROG)
        if status:
            raise SystemExit(status)

    return run_command


def _command(op: Operation) -> ActionCommand:
    return ActionCommand(
        name=command_name(op.name),
        help=op.help,
        func=_runner(op),
        args=tuple(Arg(option.flags, **option.kwargs) for option in operation_options(op)),  # type: ignore[no-untyped-call]
    )


def get_cli_commands() -> list[CLICommand]:
    return [
        GroupCommand(
            name=GROUP,
            help="Exactly-once Kafka pipelines: " + ", ".join(command_name(op.name) for op in OPERATIONS),
            subcommands=tuple(_command(op) for op in OPERATIONS),
            description="Manual operations on a pipeline's ledger, with connections from Airflow. "
            "The same commands as the airflow-kafka-offsets console script.",
        )
    ]
