"""Which Spark runs a batch, and whether what the batch hands it fits that Spark.

The cluster's Spark is a property of the Spark connection, not of the Airflow worker: spark-submit
runs the Spark of the ``spark-binary`` the connection names (as the Spark provider resolves it: a
bare name on the worker's PATH, ``$SPARK_HOME`` first), and a Spark Connect server runs its own.
Its version decides the Kafka connector's coordinates (Scala 2.12 for Spark 3.5, 2.13 for 4.x).
Every refusal here happens before anything is planned and names what runs, what was expected
and what to use. Run ``python -m airflow_kafka_offsets.spark.versions`` to see the local install.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_kafka_offsets.errors import ConfigurationError, SparkVersionMismatchError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import (
    CONNECTOR_ARTIFACT,
    CONNECTOR_JAR,
    connector_coordinates,
    connector_mismatch,
    pyspark_mismatch,
    scala_binary_version,
    spark_line,
    spark_release,
)

# The Spark lines a batch is tested on (README: compatibility). Older lines lack what the app uses.
SUPPORTED_LINES = ("3.5", "4.0", "4.1", "4.2")
_SPARK_CORE_JAR = re.compile(r"^spark-core_(?P<scala>2\.1[0-9])-(?P<version>\d+\.\d+\.\d+[^/]*)\.jar$")
_SUBMIT_VERSION = re.compile(r"version (\d+\.\d+\.\d+\S*)")
_SUBMIT_SCALA = re.compile(r"Using Scala version (2\.1[0-9])")
_PYSPARK_VERSION = re.compile(r"""^__version__(?::\s*str)?\s*=\s*["']([^"']+)["']""", re.MULTILINE)


@dataclass(frozen=True)
class ClusterSpark:
    """The Spark that runs the batch: its version, Scala binary version and how that was found."""

    version: str
    scala: str
    source: str
    # The Spark home it was found in (None when declared or read from ``spark-submit --version``).
    home: Path | None = None

    @property
    def line(self) -> str:
        return str(spark_line(self.version))

    def describe(self) -> str:
        return f"Spark {self.version} (Scala {self.scala}; {self.source})"


def distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class WorkerPyspark:
    """The worker's pyspark: its version and package directory."""

    version: str
    directory: Path


def worker_pyspark() -> WorkerPyspark:
    """The worker's pyspark, found without importing it: ``import pyspark`` loads ``pyspark.sql``
    (about a third of a second), which a plan task's version checks do not need."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError("pyspark is not installed")
    directory = Path(next(iter(spec.submodule_search_locations)))
    try:
        found = _PYSPARK_VERSION.search((directory / "version.py").read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"pyspark at {directory} has no readable version.py ({exc})") from exc
    if found is None:
        raise ConfigurationError(f"pyspark at {directory}: no __version__ in version.py")
    return WorkerPyspark(found.group(1), directory)


def local_pyspark_version() -> str:
    """The version of the worker's pyspark Python files, checked against its wheel and its jars."""
    pyspark = worker_pyspark()
    files_version = pyspark.version
    wheel_version = distribution_version("pyspark")
    if wheel_version is not None and wheel_version != files_version:
        raise ConfigurationError(
            f"pyspark's Python files are version {files_version} but the pyspark wheel is {wheel_version} "
            f"(pyspark-client {distribution_version('pyspark-client')} was installed over it?): "
            f"reinstall with `pip install --force-reinstall --no-deps pyspark=={wheel_version}`"
        )
    core = sorted((pyspark.directory / "jars").glob("spark-core_2.1*-*.jar"))
    if core and f"-{files_version}.jar" not in core[0].name:
        raise ConfigurationError(f"pyspark {files_version} ships {core[0].name}: the install is mixed")
    return files_version


def declared_spark(version: str, source: str) -> ClusterSpark:
    """A version the user states (the connection's ``spark-version`` extra, ``[kafka_offsets] spark_version``)."""
    try:
        return checked(ClusterSpark(version.strip(), scala_binary_version(version), source))
    except ValueError as exc:
        raise ConfigurationError(f"{source}: {exc}") from exc


def checked(spark: ClusterSpark) -> ClusterSpark:
    """Refuse a Spark line the app is not tested on, before anything is planned."""
    if spark.line not in SUPPORTED_LINES:
        raise SparkVersionMismatchError(
            f"the batch would run on {spark.describe()}, which this package does not support: "
            f"use Spark {', '.join(SUPPORTED_LINES)}"
        )
    return spark


def spark_home_spark(home: Path) -> ClusterSpark | None:
    """The Spark of a Spark home, from its ``jars/spark-core_<scala>-<version>.jar``; None if it has none."""
    found = [m for p in (home / "jars").glob("spark-core_*.jar") if (m := _SPARK_CORE_JAR.match(p.name))]
    if len(found) != 1:
        return None
    return ClusterSpark(found[0].group("version"), found[0].group("scala"), f"Spark home {home}", home)


def parse_submit_version(output: str) -> tuple[str, str] | None:
    """(version, Scala binary version) from ``spark-submit --version``'s banner."""
    version, scala = _SUBMIT_VERSION.search(output), _SUBMIT_SCALA.search(output)
    return (version.group(1), scala.group(1)) if version and scala else None


def spark_homes_of(binary_path: str, env: Mapping[str, str]) -> list[Path]:
    """Where the Spark that ``binary_path`` runs may live, in the order spark-submit's scripts look."""
    homes = [Path(env["SPARK_HOME"])] if env.get("SPARK_HOME") else []
    bin_dir = Path(os.path.realpath(binary_path)).parent
    homes.append(bin_dir.parent)
    if (bin_dir / "find_spark_home.py").is_file() and bin_dir == Path(sys.executable).parent:
        # pyspark's pip wrapper in this Python's bin/: its SPARK_HOME is this Python's pyspark
        homes.append(worker_pyspark().directory)
    return homes


def submit_spark(binary_path: str, env: Mapping[str, str]) -> ClusterSpark:
    """The Spark a spark-submit runs: from its Spark home's jars, else from ``--version`` (a JVM start)."""
    for home in spark_homes_of(binary_path, env):
        found = spark_home_spark(home)
        if found is not None:
            return checked(found)
    return checked(_submit_version(binary_path, env.get("SPARK_HOME", ""), env.get("PATH", "")))


@functools.cache
def _submit_version(binary_path: str, spark_home: str, path: str) -> ClusterSpark:
    env = {**os.environ, "PATH": path, **({"SPARK_HOME": spark_home} if spark_home else {})}
    try:
        done = subprocess.run(
            [binary_path, "--version"], capture_output=True, text=True, timeout=120, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigurationError(f"{binary_path} --version could not run ({exc}): is Spark installed there?") from exc
    parsed = parse_submit_version(done.stdout + done.stderr)
    if parsed is None:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise ConfigurationError(
            f"{binary_path} --version did not say which Spark it runs (exit {done.returncode}: {' | '.join(tail)}); "
            "declare it in the Spark connection's extra as spark-version"
        )
    return ClusterSpark(parsed[0], parsed[1], f"{binary_path} --version")


def pyspark_version_in(entry: str) -> str | None:
    """The version of the ``pyspark`` package a Python path entry (a directory or a zip) holds; None if none."""
    try:
        if zipfile.is_zipfile(entry):
            with zipfile.ZipFile(entry) as archive:
                text = archive.read("pyspark/version.py").decode("utf-8")
        else:
            text = (Path(entry) / "pyspark" / "version.py").read_text(encoding="utf-8")
    except (OSError, KeyError, UnicodeDecodeError):
        return None
    found = _PYSPARK_VERSION.search(text)
    return found.group(1) if found else None


def driver_python_path(home: Path, env: Mapping[str, str]) -> list[str]:
    """The path the driver's Python starts with under spark-submit (PythonRunner, client mode): the
    home's ``python/lib`` zips (pyspark.zip, py4j), then ``$PYTHONPATH``; its own site-packages come after."""
    lib = home / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip")) if lib.is_dir() else []
    zips.sort(key=lambda p: not p.endswith("/pyspark.zip"))
    return zips + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def driver_python(conf: Mapping[str, str], env: Mapping[str, str]) -> str:
    """The driver's Python, as PythonRunner picks it."""
    return (
        conf.get("spark.pyspark.driver.python")
        or conf.get("spark.pyspark.python")
        or env.get("PYSPARK_DRIVER_PYTHON")
        or env.get("PYSPARK_PYTHON")
        or "python3"
    )


def check_driver_pyspark(spark: ClusterSpark, conf: Mapping[str, str], env: Mapping[str, str]) -> None:
    """The pyspark a client-mode driver will import must be the Spark's own: refused before planning,
    where the app would refuse it on the driver after planning. Known from the path spark-submit gives
    the driver, else (a home without ``python/lib/pyspark.zip``) when the driver's Python is this one."""
    if spark.home is None:
        return
    for entry in driver_python_path(spark.home, env):
        version = pyspark_version_in(entry)
        if version is not None:
            where = entry
            break
    else:
        python = shutil.which(driver_python(conf, env), path=env.get("PATH"))
        if python is None or os.path.abspath(python) != os.path.abspath(sys.executable):
            return  # another interpreter: its own pyspark is its business, checked on the driver
        pyspark = worker_pyspark()
        version, where = pyspark.version, f"{pyspark.directory}, the driver's Python's own"
    problem = pyspark_mismatch(version, where, spark.version)
    if problem:
        raise SparkVersionMismatchError(f"{problem} ({spark.source})")


def check_connector_jars(jars: Sequence[str], spark: ClusterSpark) -> None:
    """Local connector jars must be built for the Spark that will run them."""
    found = [(m.group(2), m.group(1)) for j in jars if (m := CONNECTOR_JAR.search(j))]
    if not found:
        raise ConfigurationError(
            f"none of the configured Spark jars is {CONNECTOR_ARTIFACT} (Spark's Kafka connector): {list(jars)}; "
            f"for {spark.describe()} use {connector_coordinates(spark.version, spark.scala)}"
        )
    for version, scala in found:
        problem = connector_mismatch(version, scala, spark.version, spark.scala)
        if problem:
            raise SparkVersionMismatchError(f"{problem} ({spark.source})")


def check_connector_packages(packages: Sequence[str], spark: ClusterSpark) -> None:
    """``--packages`` coordinates of the connector must be built for the Spark that will run them."""
    for package in packages:
        group, _, rest = package.partition(":")
        artifact, _, version = rest.partition(":")
        if group != "org.apache.spark" or not artifact.startswith(CONNECTOR_ARTIFACT + "_"):
            continue
        problem = connector_mismatch(version, artifact.rsplit("_", 1)[1], spark.version, spark.scala)
        if problem:
            raise SparkVersionMismatchError(f"{problem} ({spark.source})")


def check_connect_client(client_version: str, server_version: str, where: str) -> None:
    """A Spark Connect client may be older than its server, never newer (Spark's compatibility rule)."""
    client, server = spark_line(client_version), spark_line(server_version)
    checked(ClusterSpark(server_version, scala_binary_version(server_version), f"Spark Connect server at {where}"))
    if tuple(map(int, client.split("."))) > tuple(map(int, server.split("."))):
        raise SparkVersionMismatchError(
            f"the Spark Connect server at {where} runs Spark {server_version} but this worker's client is pyspark "
            f"{client_version}, and a Connect client may not be newer than its server: install "
            f"pyspark=={spark_release(server_version)} and pyspark-client=={spark_release(server_version)} on the "
            f"Airflow workers (a client of Spark {server} drives servers of Spark {server} and later), or upgrade "
            "the server"
        )


# Spark's own readers of the tables the sinks write, per Spark line (Maven Central, Nov 2026). The
# sinks need none of them: Spark writes plain Parquet and the commits run in Python.
TABLE_READER_PACKAGES: dict[str, dict[str, str]] = {
    "iceberg": {
        "3.5": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.1",
        "4.0": "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.1",
        "4.1": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0",
    },
    "delta": {
        "3.5": "io.delta:delta-spark_2.12:3.3.2",
        "4.0": "io.delta:delta-spark_4.0_2.13:4.4.0",
        "4.1": "io.delta:delta-spark_4.1_2.13:4.4.0",
        "4.2": "io.delta:delta-spark_4.2_2.13:4.4.0",
    },
}


def table_reader_package(table_format: str, spark_version: str) -> str:
    """The ``spark.jars.packages`` entry that lets this Spark read the sink's tables; refused when none exists."""
    line = spark_line(spark_version)
    by_line = TABLE_READER_PACKAGES.get(table_format, {})
    if line not in by_line:
        raise ConfigurationError(
            f"no {table_format} runtime for Spark {line} is released (known: "
            f"{', '.join(f'Spark {v}' for v in by_line) or 'none'}): read the table with Spark "
            f"{' or '.join(by_line) or '-'}, or another engine (PyIceberg, delta-rs, Trino, DuckDB)"
        )
    return by_line[line]


def main() -> int:
    try:
        version = local_pyspark_version()
    except ConfigurationError as exc:
        print(f"versions: {exc}", file=sys.stderr)
        return 1
    print(
        f"versions: pyspark {version} (pyspark-client {distribution_version('pyspark-client')}), "
        f"apache-airflow {distribution_version('apache-airflow')}, "
        f"confluent-kafka {distribution_version('confluent-kafka')}, "
        f"local connector {connector_coordinates(version)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
