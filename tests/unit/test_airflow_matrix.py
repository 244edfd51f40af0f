"""scripts/airflow-matrix's table: feature x Airflow line from each line's record, written between docs/airflow.md's
markers."""

from __future__ import annotations

import airflow_matrix

from airflow_kafka_offsets.airflow_features import FEATURES


def record(version: str, missing: set[str], smoke: dict[str, str]) -> dict:
    return {"airflow": version, "features": {f.name: f.name not in missing for f in FEATURES}, "smoke": smoke}


def test_the_table_says_per_line_which_features_were_found_and_how_each_smoke_step_ended():
    records = {
        "3.1": record("3.1.8", {"partitioned_assets"}, {"test_the_cli_status_json": "passed"}),
        "3.3": record(
            "3.3.2", set(), {"test_the_cli_status_json": "failed", "test_every_example_dag_parses": "passed"}
        ),
    }
    lines = airflow_matrix.table(records).splitlines()
    assert lines[0] == "| feature | Airflow 3.1 (3.1.8) | Airflow 3.3 (3.3.2) |"
    partitioned = next(line for line in lines if "PartitionedAssetTimetable" in line)
    assert partitioned.endswith("| no (needs 3.3) | yes |")
    assert lines[-2:] == [
        "| smoke: every example dag parses | not run | passed |",
        "| smoke: the cli status json | passed | failed |",
    ]


def test_the_docs_have_the_table_markers():
    text = airflow_matrix.DOC.read_text()
    assert text.index(airflow_matrix.START) < text.index(airflow_matrix.END)
