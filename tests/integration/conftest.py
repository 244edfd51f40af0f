"""Session fixtures: the real local stack (Kafka, PostgreSQL, Spark) and a migrated Airflow DB.

A service that cannot start fails the tests that need it; nothing is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

import devstack
from airflow_kafka_offsets.ledger import Ledger

from . import pipeline
from .helpers import new_ledger, topic_maker


@pytest.fixture(scope="session")
def stack() -> Iterator[devstack.StackInfo]:
    services = devstack.status()["services"]
    already_running = bool(services) and all(services.get(name, {}).get("alive") for name in ("postgres", "kafka"))
    info = devstack.up()
    os.environ.update(info.airflow_env())
    yield info
    if not already_running:
        devstack.down()


@pytest.fixture(scope="session")
def spark_cluster(stack: devstack.StackInfo) -> Iterator[str]:
    url = devstack.start_spark_cluster()
    os.environ["AIRFLOW_CONN_SPARK_CLUSTER"] = json.dumps({"conn_type": "spark", "host": url})
    yield url
    devstack.stop_spark_cluster()


@pytest.fixture(scope="session")
def spark_connect(stack: devstack.StackInfo) -> Iterator[str]:
    """A warm Spark Connect server (one query answered) and its ``spark_connect`` connection's id."""
    from airflow_kafka_offsets.hooks.spark import spark_connection
    from airflow_kafka_offsets.spark.connect import remote_session

    already_running = devstack.status()["services"].get("spark_connect", {}).get("alive", False)
    started = time.monotonic()
    conn = devstack.start_spark_connect()
    conn_id = "spark_connect_default"
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    session = remote_session(spark_connection(conn_id).connect_url())
    assert session.range(1000).count() == 1000
    session.stop()
    print(f"Spark Connect server warm in {time.monotonic() - started:.0f}s")
    yield conn_id
    if not already_running:
        devstack.stop_spark_connect()


@pytest.fixture()
def batches_on_spark_connect(spark_connect: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's batches through tests/integration/pipeline.py run on the warm Spark Connect server.

    For tests whose subject is the ledger, the sinks or the operations rather than spark-submit:
    the app and its checks are the same, without a JVM start per batch. spark-submit itself stays
    covered by the smoke, failure, security, crash, cluster, fault and DAG tests.
    """
    monkeypatch.setattr(pipeline, "SPARK_CONN_ID", spark_connect)
    return spark_connect


@pytest.fixture(scope="session")
def airflow_db(stack: devstack.StackInfo) -> str:
    """`airflow db migrate` once per session on the throwaway AIRFLOW_HOME."""
    airflow = str(Path(sys.executable).parent / "airflow")
    result = subprocess.run([airflow, "db", "migrate"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return os.environ["AIRFLOW_HOME"]


@pytest.fixture()
def schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def ledger(stack: devstack.StackInfo, schema: str) -> Ledger:
    return new_ledger(stack, schema)


@pytest.fixture()
def kafka_admin(stack: devstack.StackInfo) -> AdminClient:
    return AdminClient({"bootstrap.servers": stack.bootstrap_servers})


@pytest.fixture()
def make_topic(kafka_admin: AdminClient) -> Callable[..., str]:
    return topic_maker(kafka_admin)


@pytest.fixture()
def add_partitions(kafka_admin: AdminClient) -> Callable[[str, int], None]:
    def grow(topic: str, total: int) -> None:
        kafka_admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=30)

    return grow


BROWSER_LEDGER_SCHEMA = "browser_tests"


@pytest.fixture(scope="session")
def airflow_ui(stack: devstack.StackInfo, spark_connect: str) -> Iterator[dict]:
    """A real Airflow (api-server, scheduler, dag-processor, triggerer) on the stack, its ledger in its own schema,
    started after the Spark Connect server so that its connection is among the deployment's.

    Reused when already running (it then must use that schema and be this interpreter's Airflow, the one of the
    line under test); stopped afterwards if started here.
    """
    already_running = devstack.status()["services"].get("airflow_api_server", {}).get("alive", False)
    started = time.monotonic()
    airflow = devstack.start_airflow(ledger_schema=BROWSER_LEDGER_SCHEMA)
    print(f"Airflow ready in {time.monotonic() - started:.0f}s at {airflow['url']}")
    assert airflow["ledger_schema"] == BROWSER_LEDGER_SCHEMA, (
        f"the running Airflow uses ledger schema {airflow['ledger_schema']!r}; stop it (scripts/stack down)"
    )
    assert airflow.get("airflow") == devstack.airflow.airflow_bin(), (
        f"the running Airflow is {airflow.get('airflow')}, not this interpreter's; stop it (scripts/stack down)"
    )
    yield airflow
    if not already_running:
        devstack.stop_airflow()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's headless chromium through /usr/bin/chromedriver (never a downloaded browser or driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        assert Path(path).exists(), (
            f"{path} is missing: run scripts/bootstrap (apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1700"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.implicitly_wait(10)
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def _browser_left_blank(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the browser, leave it on a blank page: Airflow's pages poll the API every few
    seconds, and an open one kept a core busy for the rest of the session."""
    yield
    if "browser" in request.fixturenames:
        request.getfixturevalue("browser").get("about:blank")


# Outcomes of the Airflow line's smoke (test_airflow_line.py), written with the features this Airflow has
# to out/airflow-lines/<line>.json when the session ends: docs/airflow.md's table is made from them.
AIRFLOW_LINE_RESULTS = Path(__file__).resolve().parents[2] / "out" / "airflow-lines"
_line_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "airflow_line" not in report.keywords:
        return
    if report.when == "call" or report.outcome != "passed":
        name = report.nodeid.rsplit("::", 1)[-1]
        if _line_outcomes.get(name) != "failed":
            _line_outcomes[name] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _line_outcomes:
        return
    from airflow_kafka_offsets import airflow_features

    version = airflow_features.airflow_version()
    AIRFLOW_LINE_RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        "airflow": version,
        "features": airflow_features.detected(),
        "smoke": dict(sorted(_line_outcomes.items())),
    }
    (AIRFLOW_LINE_RESULTS / f"{airflow_features.airflow_line()}.json").write_text(json.dumps(record, indent=2) + "\n")
