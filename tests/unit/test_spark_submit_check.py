"""spark-submit's check before planning: the connection's spark-binary, the Spark it runs, the connector."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_kafka_offsets.errors import ConfigurationError, SparkVersionMismatchError
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter


def fake_spark_home(root: Path, version: str, scala: str, binary: str = "spark-submit") -> Path:
    """A Spark home as a cluster client has it: bin/<binary> and jars/spark-core_<scala>-<version>.jar."""
    (root / "bin").mkdir(parents=True)
    (root / "jars").mkdir()
    (root / "jars" / f"spark-core_{scala}-{version}.jar").touch()
    script = root / "bin" / binary
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    return root


def connection(monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    conn = {"conn_type": "spark", "host": "yarn", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))


def test_the_connections_spark_binary_is_the_one_that_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = fake_spark_home(tmp_path / "emr", "3.5.1-amzn-0", "2.12", binary="spark3-submit")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    connection(monkeypatch, **{"spark-binary": "spark3-submit"})
    checked = SparkBatchSubmitter(SparkSettings()).check()
    assert checked.binary == "spark3-submit"
    assert (checked.spark.version, checked.spark.scala) == ("3.5.1-amzn-0", "2.12")
    assert checked.spark.source == f"Spark home {home}"
    assert checked.packages == ("org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.1",)


def test_spark_home_wins_over_the_binarys_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on_path = fake_spark_home(tmp_path / "a", "4.2.0", "2.13")
    exported = fake_spark_home(tmp_path / "b", "4.0.1", "2.13")
    monkeypatch.setenv("PATH", f"{on_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("SPARK_HOME", str(exported))
    connection(monkeypatch)
    assert SparkBatchSubmitter(SparkSettings()).check().spark.version == "4.0.1"


def test_a_declared_version_wins_and_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = fake_spark_home(tmp_path / "s", "4.2.0", "2.13")
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    connection(monkeypatch, **{"spark-version": "4.1.2"})
    assert SparkBatchSubmitter(SparkSettings(spark_version="4.0.1")).check().spark.version == "4.1.2"
    connection(monkeypatch)
    assert SparkBatchSubmitter(SparkSettings(spark_version="4.0.1")).check().spark.version == "4.0.1"
    connection(monkeypatch, **{"spark-version": "3.3.2"})
    with pytest.raises(SparkVersionMismatchError, match=r"Spark 3\.3\.2 .*does not support: use Spark 3\.5, 4\.0"):
        SparkBatchSubmitter(SparkSettings()).check()


def test_a_binary_the_provider_would_refuse_is_refused_first(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, **{"spark-binary": "/opt/spark/bin/spark-submit"})
    with pytest.raises(
        ConfigurationError, match="spark-binary '/opt/spark/bin/spark-submit' is not one of spark-submit"
    ):
        SparkBatchSubmitter(SparkSettings()).check()
    connection(monkeypatch, **{"spark-binary": "spark2-submit"})
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigurationError, match=r"spark2-submit \(Spark connection 'spark_default'\) is not on PATH"):
        SparkBatchSubmitter(SparkSettings()).check()
