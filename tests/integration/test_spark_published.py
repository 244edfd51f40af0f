"""The Kafka connector a Spark home gets when its own release is not served, against Maven Central (the
repository here): a Spark 4.0.3 home (the 4.0 line's, as `scripts/stack spark-home 4.0` installs it)
gets 4.0.0 before anything is planned, and spark-submit's Ivy fetches it; the worker's pyspark on
PYTHONPATH is no obstacle (the home's pyspark.zip comes first), as the plan-time check knows."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.spark.published import (
    AVRO_ARTIFACTS,
    CONNECTOR_ARTIFACTS,
    KNOWN_RELEASES,
    MAVEN_CENTRAL,
    connector_release,
    published_release,
    served_releases,
)
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.versions import ClusterSpark, worker_pyspark
from devstack import spark_lines, state

CONNECTOR_4_0 = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"


@pytest.mark.integration
def test_maven_central_serves_the_releases_chosen_and_tabled(caplog: pytest.LogCaptureFixture) -> None:
    served = served_releases(CONNECTOR_ARTIFACTS, "2.13", (MAVEN_CENTRAL,))
    assert served is not None
    # the connector of 4.0.3 is there, its token provider is not: the line's only release with both is 4.0.0
    assert "4.0.3" not in served and "4.0.0" in served
    with caplog.at_level(logging.WARNING, logger="airflow_kafka_offsets.spark.published"):
        assert connector_release(ClusterSpark("4.0.3", "2.13", "a 4.0.3 home"), {}) == "4.0.0"
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(
        "Spark 4.0.3: org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.3 not served by "
        "https://repo1.maven.org/maven2; using 4.0.0 of the 4.0 line"
    )
    assert connector_release(ClusterSpark("4.2.0", "2.13", "the worker's"), {}) == "4.2.0"
    assert connector_release(ClusterSpark("3.5.7", "2.12", "a 3.5.7 home"), {}) == "3.5.7"
    # Spark's Avro module of 4.0.3 is not there either: the nearest of the line is 4.0.2
    assert published_release(AVRO_ARTIFACTS, ClusterSpark("4.0.3", "2.13", "a 4.0.3 home"), {}) == "4.0.2"
    # the table that stands in for an unanswered lookup is what Central serves
    for artifacts, by_line in KNOWN_RELEASES.items():
        for (line, scala), releases in by_line.items():
            found = served_releases(artifacts, scala, (MAVEN_CENTRAL,)) or set()
            assert set(releases) == {v for v in found if v.startswith(line + ".") and "-" not in v}, (artifacts, line)
    # a repository that does not answer: the table
    dead = {"spark.jars.repositories": "http://127.0.0.1:9/maven"}
    assert connector_release(ClusterSpark("4.0.2", "2.13", "a 4.0.2 home"), dead) == "4.0.0"
    # a line nothing is published for (Spark 4 is not built for Scala 2.12): refused, saying what to set
    with pytest.raises(ConfigurationError) as refused:
        connector_release(ClusterSpark("4.1.2", "2.12", "a home"), {})
    assert str(refused.value).startswith(
        "no release of the Spark 4.1 line of org.apache.spark:spark-sql-kafka-0-10_2.12 and "
        "org.apache.spark:spark-token-provider-kafka-0-10_2.12 is served by https://repo1.maven.org/maven2"
    )
    assert "set spark_packages" in str(refused.value) and "spark.jars.repositories" in str(refused.value)


# spark-submit hands a Python app the jars --packages resolved on its path (spark.submit.pyFiles): the app
# needs no Spark session to show them, nor to show which pyspark its Python imports.
APP = """\
import sys
import pyspark
print("AKO_JARS " + ",".join(p.rsplit("/", 1)[-1] for p in sys.path if p.endswith(".jar")), flush=True)
print("AKO_PYSPARK " + pyspark.__version__, flush=True)
"""


@pytest.mark.integration
def test_a_spark_4_0_3_home_gets_a_connector_ivy_fetches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = spark_lines.spark_home("4.0")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    # the worker's pyspark (4.2) on PYTHONPATH: spark-submit puts the home's pyspark.zip before it
    worker_site = str(worker_pyspark().directory.parent)
    monkeypatch.setenv("PYTHONPATH", worker_site)
    checked = settings_runner(SparkSettings()).check()
    assert (checked.spark.version, checked.packages) == ("4.0.3", (CONNECTOR_4_0,))

    # spark-submit's Ivy resolves exactly those coordinates from Maven Central (its cache: the suite's)
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = spark_lines.submit_env(home)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = worker_site
    ivy = state.cache_dir() / "ivy-spark-published"
    argv = [str(home / "bin" / "spark-submit"), "--master", "local[1]", "--packages", ",".join(checked.packages)]
    argv += ["--conf", f"spark.jars.ivy={ivy}", str(app)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("AKO_JARS ")]
    jars = line.removeprefix("AKO_JARS ").split(",")
    assert "org.apache.spark_spark-sql-kafka-0-10_2.13-4.0.0.jar" in jars
    assert "org.apache.spark_spark-token-provider-kafka-0-10_2.13-4.0.0.jar" in jars
    assert not [j for j in jars if j.startswith("org.apache.spark_") and "4.0.3" in j]
    assert f"AKO_PYSPARK {checked.spark.version}" in done.stdout.splitlines()
