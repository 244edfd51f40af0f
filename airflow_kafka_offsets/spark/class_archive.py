"""A class-data-sharing archive for spark-submit's driver JVM.

Most of a small batch's spark-submit time is the driver JVM loading and verifying Spark's,
Kafka's and Parquet's classes, the same ones every batch (benchmarks/results/small-batch-cds.md:
a 10,000-record batch in 12 s instead of 20 s). The first batch writes the classes it loaded to an
archive when its JVM exits; every later batch maps the archive instead of loading them again.

The archive belongs to one JDK, one Spark install and one set of jars: its name is derived from
them, so a change finds no archive and writes a new one. A JVM that cannot use an archive says so
in its output and loads its classes as usual; a batch never fails for it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_offsets.errors import ConfigurationError

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


@dataclass(frozen=True)
class ArchiveUse:
    """The driver JVM's option for one batch, and where a new archive is written, if it is."""

    java_option: str
    archive: Path
    written_to: Path | None  # a temporary file that becomes the archive once the batch succeeded


def check_directory(directory: str) -> None:
    """Refuse a directory the driver's Java options cannot carry."""
    if not directory.strip() or any(c.isspace() for c in directory):
        raise ConfigurationError(
            f"spark_class_archive_dir {directory!r} must be a path without whitespace "
            "(it goes into spark.driver.extraJavaOptions, which Spark splits on whitespace)"
        )


def archive_path(directory: str, identity: Sequence[str]) -> Path:
    """The archive of one JDK, Spark install and set of jars (``identity``) in ``directory``
    (checked by :func:`check_directory` before the batch)."""
    digest = hashlib.sha256("\0".join(identity).encode()).hexdigest()[:16]
    return Path(directory).absolute() / f"spark-driver-{digest}.jsa"


def plan_use(archive: Path, exists: bool, attempt_id: str) -> ArchiveUse:
    """Map the archive when it exists; otherwise write it at exit, under a name of this attempt's own."""
    if exists:
        return ArchiveUse(f"-XX:SharedArchiveFile={archive}", archive, None)
    written = archive.with_name(f"{archive.stem}.{attempt_id}.tmp")
    return ArchiveUse(f"-XX:ArchiveClassesAtExit={written}", archive, written)


def with_driver_java_option(conf: Mapping[str, str], option: str) -> dict[str, str]:
    """``conf`` with ``option`` after the driver's extra Java options it already has."""
    existing = conf.get(DRIVER_JAVA_OPTIONS, "").strip()
    return {**conf, DRIVER_JAVA_OPTIONS: f"{existing} {option}".strip()}


def jvm_identity(spark_binary: str, jars: Sequence[str], packages: Sequence[str]) -> tuple[str, ...]:
    """What an archive is only valid for: the JDK, the Spark install, the jars handed to spark-submit."""
    spark = shutil.which(spark_binary)
    java_home = os.environ.get("JAVA_HOME", "")
    java = shutil.which("java", path=str(Path(java_home) / "bin")) if java_home else shutil.which("java")
    return (
        os.path.realpath(java) if java else "",
        os.path.realpath(spark) if spark else spark_binary,
        *jars,
        *packages,
    )


def prepare(directory: str, identity: Sequence[str], attempt_id: str) -> ArchiveUse:
    """The archive's use for one batch, its directory created if need be."""
    archive = archive_path(directory, identity)
    archive.parent.mkdir(parents=True, exist_ok=True)
    return plan_use(archive, archive.is_file(), attempt_id)


def settle(use: ArchiveUse, succeeded: bool) -> None:
    """After spark-submit: a new archive of a successful batch takes its place; any other is removed.

    The rename is atomic: a concurrent batch maps either the whole archive or none.
    """
    if use.written_to is None:
        return
    if succeeded and use.written_to.is_file():
        os.replace(use.written_to, use.archive)
    else:
        use.written_to.unlink(missing_ok=True)
