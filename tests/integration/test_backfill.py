"""Airflow's Backfill on the ingest DAG, through the real deployment: refused, with nothing created.

The cursor, not a run's data interval, decides what an ingest batch reads, so a backfill run would
not ingest "its" interval: the example DAG allows only scheduled and manual runs, and the plan step
refuses a backfill run in any DAG that allows one (tests/unit/test_operators.py).
"""

from __future__ import annotations

import json
import urllib.error

import pytest

import devstack

from .test_assets_lineage import DAG_ID, api, runs_of

WINDOW = {"from_date": "2026-01-01T00:00:00Z", "to_date": "2026-01-01T00:20:00Z"}


def test_a_backfill_of_the_ingest_dag_is_refused_by_the_cli_and_the_api_and_creates_no_run(airflow_ui):
    result = devstack.airflow_cli(
        "backfill", "create", "--dag-id", DAG_ID, "--from-date", "2026-01-01", "--to-date", "2026-01-01T00:20:00"
    )
    assert result.returncode != 0, result.stdout[-2000:]
    assert f"Dag with dag_id: '{DAG_ID}' does not allow backfill runs" in result.stdout + result.stderr

    # the UI's Backfill dialog posts here
    with pytest.raises(urllib.error.HTTPError) as refused:
        api(airflow_ui, "backfills", "POST", {"dag_id": DAG_ID, **WINDOW, "max_active_runs": 1})
    assert refused.value.code == 400
    assert "does not allow backfill runs" in json.loads(refused.value.read())["detail"]

    assert [r for r in runs_of(airflow_ui, DAG_ID).values() if r["run_type"] == "backfill"] == []
    assert api(airflow_ui, f"backfills?dag_id={DAG_ID}")["backfills"] == []
