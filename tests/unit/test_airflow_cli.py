"""``airflow kafka-offsets``: discovered by Airflow's own CLI, one command per operation, the same
options as the console script (one definition), and its refusals before any connection is read."""

from __future__ import annotations

import argparse

import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets.airflow_features import available
from airflow_kafka_offsets.cli import build_parser, request_from_args
from airflow_kafka_offsets.cli.arguments import command_name
from airflow_kafka_offsets.cli.definition import get_cli_commands
from airflow_kafka_offsets.core.operation_fields import OPERATIONS, OperationInputError

# Airflow's CLI adds providers' commands from 3.2 on (on 3.1: test_airflow_features).
pytestmark = pytest.mark.skipif(not available("provider_cli"), reason="this Airflow's CLI loads no provider commands")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in (a.option_strings or [a.dest])} - {"-h", "--help"}


@pytest.fixture(scope="module")
def airflow_group() -> dict[str, argparse.ArgumentParser]:
    from airflow.cli import cli_parser

    return subcommands(subcommands(cli_parser.get_parser())["kafka-offsets"])


def test_airflow_discovers_the_cli_commands_from_provider_info():
    from airflow._shared.module_loading import import_string
    from airflow.providers_manager import ProvidersManager

    (path,) = airflow_kafka_offsets.get_provider_info()["cli"]
    assert import_string(path) is get_cli_commands
    assert get_cli_commands in ProvidersManager().cli_command_functions
    assert "airflow-kafka-offsets" in ProvidersManager().cli_command_providers


def test_the_group_has_one_command_per_operation(airflow_group):
    (group,) = get_cli_commands()
    assert group.name == "kafka-offsets"
    expected = {command_name(op.name) for op in OPERATIONS}
    assert {c.name for c in group.subcommands} == expected == set(airflow_group)
    assert {"status", "replay", "reset", "catch-up", "abort", "change-spec", "sweep"} <= expected


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_airflow_and_the_console_script_take_the_same_options(airflow_group, op):
    console = subcommands(build_parser())[command_name(op.name)]
    assert option_strings(airflow_group[command_name(op.name)]) == option_strings(console)


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "p", "--json"],
        ["reset", "p", "--to-offset", "7", "--partitions", "0,2", "--topic", "orders", "--execute"],
        ["replay", "p", "--batches", "3-5", "--output-root", "/tmp/again", "--spark-conn-id", "spark_x"],
        ["catch-up", "p", "--max-batches", "4", "--kafka-conn-id", "k", "--postgres-conn-id", "pg"],
        ["change-spec", "p", "--topics", "a,b", "--max-records-per-batch", "none"],
        ["abort", "p", "--reason", "records deleted", "--ledger-schema", "s"],
        ["sweep", "p", "--execute"],
    ],
    ids=lambda argv: argv[0],
)
def test_airflow_and_the_console_script_parse_alike(argv):
    from airflow.cli import cli_parser

    ours = vars(cli_parser.get_parser().parse_args(["kafka-offsets", *argv]))
    theirs = vars(build_parser().parse_args(argv))
    assert (ours.pop("subcommand"), theirs.pop("command")) == (argv[0], argv[0])
    assert callable(ours.pop("func")) and theirs.pop("operation") == argv[0].replace("-", "_")
    assert ours == theirs


def test_bad_input_exits_2_naming_the_option_before_reading_any_connection(capfd):
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(
        ["kafka-offsets", "reset", "p", "--to-offset", "x", "--kafka-conn-id", "no_such_connection"]
    )
    with pytest.raises(SystemExit) as exit_info:
        args.func(args)
    assert exit_info.value.code == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err.strip() == "airflow kafka-offsets reset: --to-offset: expected a whole number such as 42, got 'x'"


@pytest.mark.parametrize(
    ("modes", "got"),
    [([], "none"), (["--to-earliest", "--shift-by", "-3"], "--to-earliest and --shift-by")],
)
def test_reset_needs_exactly_one_mode_in_both_shells(modes, got):
    from airflow.cli import cli_parser

    message = (
        "give exactly one reset mode: --to-earliest, --to-latest, --to-datetime VALUE, --to-offset VALUE,"
        f" --shift-by VALUE; got {got}"
    )
    console_args = build_parser().parse_args(["reset", "p", *modes])
    airflow_args = cli_parser.get_parser().parse_args(["kafka-offsets", "reset", "p", *modes])
    airflow_args.operation = "reset"
    for args in (console_args, airflow_args):
        with pytest.raises(OperationInputError) as error:
            request_from_args(args)
        assert str(error.value) == message
