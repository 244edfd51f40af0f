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


# Tests marked ``long`` (a fault kind or a state-machine case the fast tests and the in-memory model already
# cover, kept for the real services) run with AKO_LONG_TESTS=1; the test command deselects them.
LONG_ENV = "AKO_LONG_TESTS"


# With pytest-xdist (scripts/test's full run: ``-n 2 --dist loadgroup -m "not serial"``) a file's tests stay on one
# worker (its module fixtures are set up once), and every file with a test on the session's real Airflow
# deployment (``airflow_ui``: one scheduler, one browser, one ledger schema) goes to one worker as one group,
# scheduled first: the longest group, it would otherwise be the run's tail.
AIRFLOW_GROUP = "airflow_deployment"


def pytest_configure(config: pytest.Config) -> None:
    global _writes_times
    _writes_times = not hasattr(config, "workerinput")  # an xdist worker's reports reach the controller too


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)
    if os.environ.get(LONG_ENV) != "1":
        long = [item for item in items if item.get_closest_marker("long")]
        if long:
            config.hook.pytest_deselected(items=long)
            items[:] = [item for item in items if not item.get_closest_marker("long")]
    if config.getoption("dist", "no") == "loadgroup":
        group_for_workers(items)


def group_for_workers(items: list[pytest.Item]) -> None:
    on_airflow = {item.path for item in items if "airflow_ui" in getattr(item, "fixturenames", ())}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(AIRFLOW_GROUP if item.path in on_airflow else str(item.path)))
    items.sort(key=lambda item: item.path not in on_airflow)  # stable: each file's order is kept


# Time per test file, printed at the end of every run (the suite's budget is spent file by file) and
# appended as each test ends to $AKO_TEST_TIMES when set, so a run cut short still says where it was.
_file_seconds: dict[str, float] = {}
_writes_times = True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration
    times = os.environ.get("AKO_TEST_TIMES")
    if times and report.when == "teardown" and _writes_times:
        with open(times, "a") as out:
            out.write(f"{report.nodeid}\t{_file_seconds[path]:.1f}\n")


@pytest.hookimpl(trylast=True)  # after pytest's own --durations list: the last lines of a CI log
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _file_seconds:
        return
    terminalreporter.section("seconds per test file (setup + call + teardown)")
    ranked = sorted(_file_seconds.items(), key=lambda item: -item[1])
    for path, seconds in ranked[:30]:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
    terminalreporter.write_line(f"{sum(_file_seconds.values()):8.1f}  in all {len(ranked)} files")
