"""Test set-up shared by unit and integration tests.

Airflow reads AIRFLOW_HOME when it is first imported, so a throwaway home is
set here, before any test module imports Airflow.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="ako-airflow-home-"))
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# spark-submit from the pyspark wheel lives next to this interpreter.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)
