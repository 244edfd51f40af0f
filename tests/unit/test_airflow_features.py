"""The Airflow features the package probes for, as the installed Airflow has them and as docs/airflow.md
tells them per line."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from airflow_kafka_offsets import airflow_features
from airflow_kafka_offsets.airflow_features import AIRFLOW_LINES, FEATURES, Feature, available
from airflow_kafka_offsets.errors import AirflowFeatureUnavailableError, ConfigurationError

DOC = Path(__file__).resolve().parents[2] / "docs" / "airflow.md"


def doc_table() -> list[list[str]]:
    text = DOC.read_text()
    block = text.split("<!-- airflow-lines:start -->", 1)[1].split("<!-- airflow-lines:end -->", 1)[0]
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in block.strip().splitlines()]


def test_this_airflow_has_exactly_the_features_declared_for_its_line():
    line = airflow_features.airflow_line()
    assert line in AIRFLOW_LINES
    assert airflow_features.detected() == airflow_features.declared(line)


def test_a_feature_is_declared_from_its_line_on():
    assert [airflow_features.declared(line)["partitioned_assets"] for line in AIRFLOW_LINES] == [False, False, True]
    assert all(airflow_features.declared("3.1")[f.name] == (f.since == "3.1") for f in FEATURES)
    assert all(airflow_features.declared("3.3").values())


def test_the_docs_table_is_what_the_package_declares_for_each_line_tested():
    header, rule, *rows = doc_table()
    lines = [re.match(r"Airflow (\d+\.\d+) \(\1\.\d+\)", cell).group(1) for cell in header[1:]]
    assert lines and set(lines) <= set(AIRFLOW_LINES) and lines == sorted(lines)
    assert rule == ["---"] * (len(lines) + 1)
    by_title = {row[0]: row[1:] for row in rows}
    for feature in FEATURES:
        expected = [
            "yes" if airflow_features.declared(line)[feature.name] else f"no (needs {feature.since})" for line in lines
        ]
        assert by_title.pop(feature.title) == expected, feature.name
    # the rest: each smoke step's outcome on each line
    assert len(by_title) >= 7 and all(title.startswith("smoke: ") for title in by_title)
    assert all(set(cells) <= {"passed", "failed", "skipped", "not run"} for cells in by_title.values())


def test_using_a_feature_this_airflow_lacks_names_it_and_the_release_it_needs(monkeypatch: pytest.MonkeyPatch):
    missing = Feature("time_travel", "Time travel", "9.9", lambda: False)
    monkeypatch.setitem(airflow_features.BY_NAME, "time_travel", missing)
    with pytest.raises(AirflowFeatureUnavailableError) as raised:
        airflow_features.require("time_travel")
    assert isinstance(raised.value, ConfigurationError)
    assert str(raised.value) == (
        f"Time travel needs Apache Airflow 9.9 or later; this is Apache Airflow {airflow_features.airflow_version()} "
        "(upgrade Airflow, or leave the feature out)"
    )
    airflow_features.available.cache_clear()


@pytest.mark.skipif("AKO_AIRFLOW_MATRIX" not in os.environ, reason="scripts/airflow-matrix's run of an older line")
def test_the_matrix_tests_the_wheel_installed_in_the_lines_venv_on_that_line():
    import airflow_kafka_offsets

    assert Path(airflow_kafka_offsets.__file__).is_relative_to(sys.prefix)
    assert "site-packages" in Path(airflow_kafka_offsets.__file__).parts
    assert airflow_features.airflow_version().startswith(os.environ["AKO_AIRFLOW_MATRIX"] + ".")


@pytest.mark.skipif(available("provider_cli"), reason="this Airflow's CLI loads providers' commands (3.2+)")
def test_without_provider_commands_airflows_cli_has_no_kafka_offsets_and_the_console_script_takes_its_arguments():
    import argparse

    from airflow.cli import cli_parser

    from airflow_kafka_offsets.cli import build_parser

    (commands,) = (a for a in cli_parser.get_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert "kafka-offsets" not in commands.choices and "dags" in commands.choices
    args = build_parser().parse_args(["status", "orders", "--json", "--ledger-schema", "s"])
    assert (args.command, args.pipeline, args.json, args.ledger_schema) == ("status", "orders", True, "s")
