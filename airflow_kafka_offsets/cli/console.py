"""``airflow-kafka-offsets``: the operations from a shell, without Airflow's own CLI.

Connections come from Airflow (``--kafka-conn-id``, ``--postgres-conn-id``, ``--spark-conn-id``),
as for the operators. Tables by default, ``--json`` for machines; logs always go to stderr, so
stdout holds only the result.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from airflow_kafka_offsets.cli.arguments import add_options, command_name, operation_options
from airflow_kafka_offsets.cli.runner import execute
from airflow_kafka_offsets.core.operation_fields import OPERATIONS

PROG = "airflow-kafka-offsets"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for op in OPERATIONS:
        cmd = sub.add_parser(command_name(op.name), help=op.help)
        cmd.set_defaults(operation=op.name)
        add_options(cmd, operation_options(op))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if not args.json else logging.WARNING, format="%(message)s", stream=sys.stderr
    )
    return execute(args, PROG)


if __name__ == "__main__":
    sys.exit(main())
