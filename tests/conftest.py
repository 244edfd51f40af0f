"""Test set-up shared by unit and integration tests.

Airflow reads AIRFLOW_HOME when it is first imported, so a throwaway home is
set here, before any test module imports Airflow.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

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


# With pytest-xdist (a full scripts/test: ``-n 2 -m "not serial"``, AKO_TEST_WORKERS) a file's tests stay on one
# worker (its module fixtures are set up once), and the files of tests on the session's real Airflow deployment
# (``airflow_ui``: one scheduler, one browser, one ledger schema that some of them drop; a file that names the
# fixture) go to one worker together, first: the longest group, it would otherwise be the run's tail. (xdist's own
# ``--dist loadgroup`` marks its groups in the test ids, which pytest 9.2 no longer lets a plugin change.)
AIRFLOW_GROUP = "airflow_deployment"


@functools.cache
def scope_of(test_file: str) -> str:
    """The worker group of a test file (a path from the repository's root, as test ids give it)."""
    uses_deployment = "airflow_ui" in (REPO / test_file).read_text(encoding="utf-8")
    return AIRFLOW_GROUP if uses_deployment else test_file


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: it is not installed everywhere
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ByFileAndDeployment(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid.split("::", 1)[0])

    config.option.loadscopereorder = False  # the groups in the order the workers collected them
    return ByFileAndDeployment(config, log)


def pytest_configure(config: pytest.Config) -> None:
    global _writes_times
    _writes_times = not hasattr(config, "workerinput")  # an xdist worker's reports reach the controller too


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)
    if os.environ.get(LONG_ENV) != "1":
        long = [item for item in items if item.get_closest_marker("long")]
        if long:
            config.hook.pytest_deselected(items=long)
            items[:] = [item for item in items if not item.get_closest_marker("long")]
    if hasattr(config, "workerinput"):  # the deployment's files first (ByFileAndDeployment keeps this order)
        items.sort(key=lambda item: scope_of(item.nodeid.split("::", 1)[0]) != AIRFLOW_GROUP)  # stable


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
