"""The dev stack's "cluster" Sparks of other lines, beside the worker's pyspark (4.2.0, unchanged).

A Spark connection names a bare ``spark-submit`` found on PATH, so the test runs each line's that
way (SPARK_HOME unset) and checks that the JVM and the Python side of a PySpark app, driver and
executor, are that line. Then a Spark Connect server of the 4.1 line with a client of its own line
(a Connect client must not be newer than its server, and the worker's client is 4.2): it answers
with its version and reads Kafka through its line's connector, and the worker's own client is refused by
it before anything is planned. A home installs once per machine
(about 40 s from PyPI, then cached); the rest takes about a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import devstack
from airflow_kafka_offsets.errors import SparkVersionMismatchError
from airflow_kafka_offsets.ledger import Ledger
from devstack import jars, procs, spark_connect, spark_lines, state

from .helpers import produce, refused

# Variables that would make a spark-submit run another Spark home, skip its conf/spark-env.sh or
# start a Connect session: a Spark connection's environment has none of them.
_FOREIGN = ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_ENV_LOADED", "SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")


def _line_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN}
    env["PATH"] = f"{home / 'bin'}{os.pathsep}{env['PATH']}"
    env["PYSPARK_PYTHON"] = sys.executable  # the worker venv's Python
    env["SPARK_LOCAL_IP"] = state.LOOPBACK
    return env


@pytest.mark.parametrize("version", ["3.5.7", "4.0.3"])
def test_spark_submit_on_path_runs_its_lines_spark_and_pyspark(version: str, tmp_path: Path) -> None:
    started = time.monotonic()
    home = spark_lines.spark_home(version)
    print(f"Spark {version} home ready in {time.monotonic() - started:.1f}s: {home}")
    assert home == spark_lines.home_dir(version)
    env = _line_env(home)

    banner = subprocess.run(["spark-submit", "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert banner.returncode == 0, banner.stderr[-2000:]
    assert spark_lines.submit_version(banner.stdout + banner.stderr) == version

    app = tmp_path / "app.py"
    app.write_text(spark_lines.PROBE_APP)
    argv = ["spark-submit", "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(app)]
    run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(li for li in run.stdout.splitlines() if li.startswith(spark_lines.PROBE_PREFIX))
    seen = json.loads(line.removeprefix(spark_lines.PROBE_PREFIX))
    # the driver's Python, the JVM, an executor's Python and the distribution metadata (spark-env.sh)
    assert (seen["python"], seen["jvm"], seen["executor_python"], seen["distribution"]) == (version,) * 4
    assert seen["pyspark_file"].startswith(f"{home}/")
    assert jars.pyspark_version() == "4.2.0"  # the worker venv's own pyspark is untouched


CLIENT = """\
import json, os, sys
import pyspark
from pyspark.sql.connect.session import SparkSession

spark = SparkSession.builder.remote(os.environ["AKO_CONNECT_URL"]).create()
kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", sys.argv[1])
         .option("subscribe", sys.argv[2]).load())
print(json.dumps({"client": pyspark.__version__, "server": spark.version, "records": kafka.count()}))
spark.stop()
"""


def older_server_is_refused_before_anything_is_planned(
    conn: dict, version: str, ledger: Ledger, topic: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own client (pyspark 4.2) may drive servers of 4.2 and later only: this server is refused by
    the plan task's check, naming both versions and the pins to install; nothing is planned."""
    import pyspark

    from airflow_kafka_offsets.operators.ingest import KafkaBatchPlanOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_OLD", json.dumps(conn))
    op = KafkaBatchPlanOperator(
        task_id="plan",
        pipeline="old_connect",
        topics=topic,
        output_root=str(tmp_path / "out"),
        spark_conn_id="spark_connect_old",
        ledger_schema=ledger.schema,
    )
    monkeypatch.setattr(KafkaBatchPlanOperator, "ledger", lambda self: ledger)
    with refused(
        SparkVersionMismatchError,
        rf"server at localhost:{conn['port']} runs Spark {re.escape(version)} but this worker's client is pyspark "
        rf"{re.escape(pyspark.__version__)}, .* install pyspark=={re.escape(version)} and "
        rf"pyspark-client=={re.escape(version)}",
    ):
        op.execute({"dag_run": None, "ti": None})
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT name FROM {s}.pipelines", ()) == []


def test_a_connect_server_of_the_41_line(
    stack: devstack.StackInfo, ledger: Ledger, make_topic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = "4.1.2"
    service = f"spark_connect_{version}"
    already_running = devstack.status()["services"].get(service, {}).get("alive", False)
    conn = devstack.start_spark_connect("4.1")
    try:
        record = state.load()["spark_connect_lines"][version]
        home = spark_lines.home_dir(version)
        status = devstack.status()["services"][service]
        assert status["alive"] and status["answers"] and status["spark_version"] == version
        assert (record["port"], record["spark_home"]) == (conn["port"], str(home))
        assert f"{home}/jars/*" in procs.cmdline(record["pid"])  # the JVM runs that line's jars
        assert any(f"spark-sql-kafka-0-10_2.13-{version}.jar" in jar for jar in record["jars"])
        default = state.load().get("spark_connect")
        assert default is None or default["port"] != record["port"]
        env_var = f"AIRFLOW_CONN_{spark_connect.conn_id(version).upper()}"
        assert json.loads(devstack.current().airflow_env()[env_var])["port"] == conn["port"]

        topic = make_topic(partitions=1)
        produce(stack.bootstrap_servers, topic, 3, 1)
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
        env["PYTHONPATH"] = str(spark_lines.site_dir(version))  # a client of the server's own line
        env["AKO_CONNECT_URL"] = f"sc://localhost:{conn['port']}/;token={conn['password']}"
        client = tmp_path / "client.py"
        client.write_text(CLIENT)
        argv = [sys.executable, str(client), stack.bootstrap_servers, topic]
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        assert json.loads(run.stdout.strip().splitlines()[-1]) == {"client": version, "server": version, "records": 3}
        assert f"Running Spark version {version}" in Path(record["log"]).read_text(errors="replace")
        older_server_is_refused_before_anything_is_planned(conn, version, ledger, topic, tmp_path, monkeypatch)
    finally:
        if not already_running:
            devstack.stop_spark_connect("4.1")
    if not already_running:
        assert service not in devstack.status()["services"]
        assert not procs.pid_alive(record["pid"])
