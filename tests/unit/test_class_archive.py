"""The driver JVM's class-data-sharing archive: its name, the option per batch, and its settling."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.spark import class_archive
from airflow_kafka_offsets.spark.class_archive import ArchiveUse

IDENTITY = ("/usr/lib/jvm/java-17/bin/java", "/opt/spark/bin/spark-submit", "/jars/spark-sql-kafka.jar")


def test_one_archive_per_jdk_spark_and_jars(tmp_path: Path) -> None:
    path = class_archive.archive_path(str(tmp_path), IDENTITY)
    assert path.parent == tmp_path and path.suffix == ".jsa"
    assert class_archive.archive_path(str(tmp_path), IDENTITY) == path
    others = {
        class_archive.archive_path(str(tmp_path), (*IDENTITY[:2], "/jars/other.jar")),
        class_archive.archive_path(str(tmp_path), ("/usr/lib/jvm/java-21/bin/java", *IDENTITY[1:])),
        class_archive.archive_path(str(tmp_path), IDENTITY[:2]),
    }
    assert path not in others and len(others) == 3


@pytest.mark.parametrize("directory", ["", "  ", "/var/cache/my jvm"])
def test_a_directory_spark_would_split_is_refused_naming_the_setting(directory: str) -> None:
    with pytest.raises(ConfigurationError, match=r"spark_class_archive_dir .* without whitespace"):
        class_archive.check_directory(directory)


def test_an_existing_archive_is_mapped_a_missing_one_written_under_the_attempts_own_name(tmp_path: Path) -> None:
    archive = tmp_path / "spark-driver-abc.jsa"
    assert class_archive.plan_use(archive, True, "a1") == ArchiveUse(f"-XX:SharedArchiveFile={archive}", archive, None)
    written = tmp_path / "spark-driver-abc.a1.tmp"
    assert class_archive.plan_use(archive, False, "a1") == ArchiveUse(
        f"-XX:ArchiveClassesAtExit={written}", archive, written
    )


def test_the_option_goes_after_the_users_driver_java_options() -> None:
    key = "spark.driver.extraJavaOptions"
    assert class_archive.with_driver_java_option({"a": "b"}, "-XX:X") == {"a": "b", key: "-XX:X"}
    assert class_archive.with_driver_java_option({key: " -Dx=1 "}, "-XX:X") == {key: "-Dx=1 -XX:X"}


def test_a_successful_batch_puts_its_archive_in_place_a_failed_one_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "spark-driver-abc.jsa"
    for attempt, succeeded in (("a1", False), ("a2", True)):
        use = class_archive.plan_use(archive, archive.is_file(), attempt)
        assert use.written_to is not None
        use.written_to.write_bytes(attempt.encode())
        class_archive.settle(use, succeeded)
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    assert archive.read_bytes() == b"a2"
    # a batch that mapped it changes nothing; nor does one whose JVM wrote nothing
    class_archive.settle(class_archive.plan_use(archive, True, "a3"), True)
    class_archive.settle(class_archive.plan_use(tmp_path / "spark-driver-def.jsa", False, "a4"), True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    assert archive.read_bytes() == b"a2"


def test_the_config_option_reaches_the_spark_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_kafka_offsets.runtime import spark_settings
    from airflow_kafka_offsets.spark.options import SparkJobOptions

    assert spark_settings(SparkJobOptions("spark_default")).class_archive_dir is None
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__SPARK_CLASS_ARCHIVE_DIR", "/var/cache/ako-jvm")
    assert spark_settings(SparkJobOptions("spark_default")).class_archive_dir == "/var/cache/ako-jvm"
