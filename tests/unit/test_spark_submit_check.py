"""spark-submit's check before planning: the connection's spark-binary, the Spark it runs, the connector."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

from airflow_kafka_offsets.errors import ConfigurationError, SparkVersionMismatchError
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter
from airflow_kafka_offsets.spark.versions import driver_python_path, pyspark_version_in, worker_pyspark


def pyspark_zip(path: Path, version: str) -> Path:
    """A zip holding a ``pyspark`` package of ``version`` (what Spark ships as python/lib/pyspark.zip)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
        archive.writestr("pyspark/version.py", f'__version__: str = "{version}"\n')
    return path


def pyspark_dir(root: Path, version: str) -> Path:
    """A directory holding a ``pyspark`` package of ``version`` (a site-packages on PYTHONPATH)."""
    (root / "pyspark").mkdir(parents=True)
    (root / "pyspark" / "version.py").write_text(f'__version__ = "{version}"\n')
    return root


def fake_spark_home(
    root: Path, version: str, scala: str, binary: str = "spark-submit", with_python: bool = True
) -> Path:
    """A Spark home as a cluster client has it: bin/<binary>, jars/spark-core_<scala>-<version>.jar and
    (``with_python``) python/lib/pyspark.zip of that version."""
    (root / "bin").mkdir(parents=True)
    (root / "jars").mkdir()
    (root / "jars" / f"spark-core_{scala}-{version}.jar").touch()
    if with_python:
        pyspark_zip(root / "python" / "lib" / "pyspark.zip", version.split("-")[0])
    script = root / "bin" / binary
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    return root


def connection(**extra: str) -> SparkConnection:
    return SparkConnection("spark_default", "spark", "yarn", extra=extra)


def test_the_connections_spark_binary_is_the_one_that_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = fake_spark_home(tmp_path / "emr", "3.5.1-amzn-0", "2.12", binary="spark3-submit")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    conn = connection(**{"spark-binary": "spark3-submit"})
    checked = SparkBatchSubmitter(SparkSettings(), conn).check()
    assert checked.binary == "spark3-submit"
    assert (checked.spark.version, checked.spark.scala) == ("3.5.1-amzn-0", "2.12")
    assert checked.spark.source == f"Spark home {home}"
    assert checked.packages == ("org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.1",)


def test_spark_home_wins_over_the_binarys_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on_path = fake_spark_home(tmp_path / "a", "4.2.0", "2.13")
    exported = fake_spark_home(tmp_path / "b", "4.0.1", "2.13")
    monkeypatch.setenv("PATH", f"{on_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("SPARK_HOME", str(exported))
    conn = connection()
    assert SparkBatchSubmitter(SparkSettings(), conn).check().spark.version == "4.0.1"


def test_a_declared_version_wins_and_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = fake_spark_home(tmp_path / "s", "4.2.0", "2.13")
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    conn = connection(**{"spark-version": "4.1.2"})
    assert SparkBatchSubmitter(SparkSettings(spark_version="4.0.1"), conn).check().spark.version == "4.1.2"
    conn = connection()
    assert SparkBatchSubmitter(SparkSettings(spark_version="4.0.1"), conn).check().spark.version == "4.0.1"
    conn = connection(**{"spark-version": "3.3.2"})
    with pytest.raises(SparkVersionMismatchError, match=r"Spark 3\.3\.2 .*does not support: use Spark 3\.5, 4\.0"):
        SparkBatchSubmitter(SparkSettings(), conn).check()


def test_a_binary_the_provider_would_refuse_is_refused_first(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = connection(**{"spark-binary": "/opt/spark/bin/spark-submit"})
    with pytest.raises(
        ConfigurationError, match="spark-binary '/opt/spark/bin/spark-submit' is not one of spark-submit"
    ):
        SparkBatchSubmitter(SparkSettings(), conn).check()
    conn = connection(**{"spark-binary": "spark2-submit"})
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigurationError, match=r"spark2-submit \(Spark connection 'spark_default'\) is not on PATH"):
        SparkBatchSubmitter(SparkSettings(), conn).check()


def test_the_pyspark_the_driver_imports_is_found_in_spark_submits_order(tmp_path: Path) -> None:
    home = fake_spark_home(tmp_path / "spark", "4.0.3", "2.13")
    py4j = home / "python" / "lib" / "py4j-0.10.9.9-src.zip"
    zipfile.ZipFile(py4j, "w").close()
    other = pyspark_dir(tmp_path / "site", "4.2.0")
    path = driver_python_path(home, {"PYTHONPATH": f"{other}:"})
    assert path == [str(home / "python" / "lib" / "pyspark.zip"), str(py4j), str(other)]
    assert [pyspark_version_in(p) for p in path] == ["4.0.3", None, "4.2.0"]
    assert pyspark_version_in(str(tmp_path / "missing")) is None


def test_a_driver_path_with_another_pyspark_first_is_refused_before_planning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """spark-submit puts the home's pyspark.zip first: a PYTHONPATH after it changes nothing. A home
    without it leaves the driver with the first pyspark on PYTHONPATH, else its Python's own."""
    monkeypatch.delenv("SPARK_HOME", raising=False)
    conn = connection()
    worker = pyspark_dir(tmp_path / "worker-site", "4.2.0")
    monkeypatch.setenv("PYTHONPATH", str(worker))
    complete = fake_spark_home(tmp_path / "complete", "4.0.3", "2.13")
    monkeypatch.setenv("PATH", f"{complete / 'bin'}:{os.environ['PATH']}")
    assert SparkBatchSubmitter(SparkSettings(packages=("x:y:1",)), conn).check().spark.version == "4.0.3"

    bare = fake_spark_home(tmp_path / "bare", "4.0.3", "2.13", with_python=False)
    monkeypatch.setenv("PATH", f"{bare / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(SparkVersionMismatchError) as refused:
        SparkBatchSubmitter(SparkSettings(packages=("x:y:1",)), conn).check()
    assert str(refused.value).startswith(
        f"the driver's Python imports pyspark 4.2.0 ({worker}) but the Spark that runs the batch is 4.0.3"
    )
    assert str(refused.value).endswith(f"(Spark home {bare})")

    # nothing on PYTHONPATH: the driver's Python (this one) imports its own pyspark
    monkeypatch.delenv("PYTHONPATH")
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    own = worker_pyspark()
    with pytest.raises(
        SparkVersionMismatchError, match=rf"imports pyspark {own.version} \({own.directory}, the driver"
    ):
        SparkBatchSubmitter(SparkSettings(packages=("x:y:1",)), conn).check()
    # another interpreter's pyspark is checked on the driver, and cluster mode's driver runs elsewhere
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/usr/bin/python3")
    SparkBatchSubmitter(SparkSettings(packages=("x:y:1",)), conn).check()
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    conn = connection(**{"deploy-mode": "cluster"})
    SparkBatchSubmitter(SparkSettings(packages=("x:y:1",)), conn).check()
