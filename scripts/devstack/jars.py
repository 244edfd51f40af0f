"""Fetch the Kafka broker jars, the Spark Kafka connector jars and Spark's S3A jars from Maven Central.

Maven checks every download against its published checksum (``--strict-checksums``). All sets go
to the cache dir (``$AKO_CACHE_DIR``), never the work tree. A
``.complete`` marker written after a successful copy makes later calls a no-op.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import procs, state
from .errors import StackError

KAFKA_VERSION = "4.1.1"
DEFAULT_SPARK_VERSION = "4.2.0"
MARKER = ".complete"
POM_DIR = Path(__file__).resolve().parent.parent / "jars"
KAFKA_POM = POM_DIR / "kafka-broker.xml"
CONNECTOR_POM = POM_DIR / "spark-connector.xml"
S3A_POM = POM_DIR / "spark-s3a.xml"
# The AWS SDK v2 version hadoop-aws declares (its `bundle` dependency), per Hadoop release:
# the S3A jars take the SDK's individual modules at that version instead of the 500 MB bundle.
AWS_SDK_FOR_HADOOP = {"3.5.0": "2.35.4"}
AWS_SDK_ENV = "AKO_AWS_SDK_VERSION"
_HADOOP_API_RE = re.compile(r"^hadoop-client-api-(?P<version>\d+(?:\.\d+)+)\.jar$")
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10"
TOKEN_PROVIDER_ENV = "AKO_TOKEN_PROVIDER_VERSION"
# Newest spark-token-provider-kafka release per Spark major version known to be in
# the Maven registry this project uses. Only consulted when the exact release is
# missing there (4.0.1+ are). Linkage-checked against spark-sql-kafka 4.2.0 and
# pyspark 4.2.0: everything resolves except two LogKeys used only in a log line
# of Kerberos delegation-token fetching, which the devstack never uses.
TOKEN_PROVIDER_FALLBACK = {"4": "4.0.0"}
_JAR_RE = re.compile(r"^(?P<name>.+)-(?P<version>\d+(?:\.\d+)+[^/]*)\.jar$")


def pyspark_version() -> str | None:
    """Version of the installed pyspark distribution, if any."""
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None


def pyspark_home() -> Path | None:
    """The pyspark package dir (it is a SPARK_HOME with bin/ and jars/), if installed."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    home = Path(spec.origin).parent
    return home if (home / "jars").is_dir() else None


def default_spark_version() -> str:
    """The installed pyspark's version, else ``DEFAULT_SPARK_VERSION``."""
    return pyspark_version() or DEFAULT_SPARK_VERSION


def kafka_libs_dir(version: str = KAFKA_VERSION) -> Path:
    return state.cache_dir() / f"kafka-{version}" / "libs"


def connector_dir(spark_version: str) -> Path:
    return state.cache_dir() / f"spark-connector-{spark_version}"


def fetch_kafka(version: str = KAFKA_VERSION, quiet: bool = False) -> Path:
    """Ensure the Kafka broker + tools jars are cached; return their libs dir."""
    dest = kafka_libs_dir(version)
    if not _complete(dest):
        _log(f"fetching Kafka {version} broker jars into {dest} ...", quiet)
        jars = _mvn_copy(KAFKA_POM, dest, {"kafka.version": version})
        _write_marker(dest, {"kafka.version": version, "jars": jars})
    return dest


def fetch_connector(spark_version: str | None = None, quiet: bool = False) -> list[Path]:
    """Ensure the spark-sql-kafka connector jars are cached; return their absolute paths."""
    version = spark_version or default_spark_version()
    dest = connector_dir(version)
    if not _complete(dest):
        _log(f"fetching spark-sql-kafka-0-10 {version} jars into {dest} ...", quiet)
        props = {"spark.version": version}
        override = os.environ.get(TOKEN_PROVIDER_ENV)
        if override:
            props["token.provider.version"] = override
        try:
            jars = _mvn_copy(CONNECTOR_POM, dest, props)
        except StackError as exc:
            fallback = TOKEN_PROVIDER_FALLBACK.get(version.split(".")[0])
            if override or not fallback or TOKEN_PROVIDER not in str(exc):
                raise
            print(
                f"devstack: WARNING: org.apache.spark:{TOKEN_PROVIDER}_2.13:{version} is not in "
                f"the Maven registry in use; using {fallback} instead (binary compatible for "
                f"everything but Kerberos delegation tokens). Set {TOKEN_PROVIDER_ENV} to "
                f"choose another version.",
                file=sys.stderr,
            )
            props["token.provider.version"] = fallback
            jars = _mvn_copy(CONNECTOR_POM, dest, props)
        jars = _drop_pyspark_duplicates(dest, jars)
        _write_marker(dest, {"spark.version": version, "properties": props, "jars": jars})
    meta = json.loads((dest / MARKER).read_text())
    return [dest / name for name in meta["jars"]]


def hadoop_version() -> str:
    """The Hadoop version inside pyspark (its ``jars/hadoop-client-api-<version>.jar``)."""
    home = pyspark_home()
    jars = (home / "jars").glob("*.jar") if home else ()
    found = [m.group("version") for p in jars if (m := _HADOOP_API_RE.match(p.name))]
    if len(found) != 1:
        raise StackError(f"cannot tell the Hadoop version inside pyspark (hadoop-client-api jars found: {found})")
    return found[0]


def s3a_dir(hadoop: str) -> Path:
    return state.cache_dir() / f"spark-s3a-{hadoop}"


def fetch_s3a(quiet: bool = False) -> list[Path]:
    """Ensure hadoop-aws (at pyspark's Hadoop version) and the AWS SDK modules it uses are cached."""
    hadoop = hadoop_version()
    sdk = os.environ.get(AWS_SDK_ENV) or AWS_SDK_FOR_HADOOP.get(hadoop)
    if not sdk:
        raise StackError(
            f"no AWS SDK version known for Hadoop {hadoop}: set {AWS_SDK_ENV} to the version of "
            f"software.amazon.awssdk:bundle that org.apache.hadoop:hadoop-aws:{hadoop} depends on"
        )
    dest = s3a_dir(hadoop)
    if not _complete(dest):
        _log(f"fetching hadoop-aws {hadoop} and AWS SDK {sdk} modules into {dest} ...", quiet)
        props = {"hadoop.version": hadoop, "aws.sdk.version": sdk}
        jars = _drop_pyspark_duplicates(dest, _mvn_copy(S3A_POM, dest, props))
        _write_marker(dest, {"hadoop.version": hadoop, "properties": props, "jars": jars})
    meta = json.loads((dest / MARKER).read_text())
    return [dest / name for name in meta["jars"]]


def fetch_all(spark_version: str | None = None, quiet: bool = False) -> tuple[Path, list[Path]]:
    """Both jar sets: (kafka libs dir, connector jar paths)."""
    return fetch_kafka(quiet=quiet), fetch_connector(spark_version, quiet=quiet)


def _complete(dest: Path) -> bool:
    return (dest / MARKER).is_file()


def _write_marker(dest: Path, meta: dict[str, Any]) -> None:
    meta = dict(meta, fetched_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    (dest / MARKER).write_text(json.dumps(meta, indent=2) + "\n")


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"devstack: {msg}", file=sys.stderr, flush=True)


def _mvn_copy(pom: Path, dest: Path, props: dict[str, str]) -> list[str]:
    """``mvn dependency:copy-dependencies`` into a temp dir, then move into ``dest``."""
    mvn = procs.require_tool("mvn", "install Maven 3.6+, e.g. apt-get install maven")
    procs.require_tool("java", "install a JDK 17, e.g. apt-get install openjdk-17-jdk-headless")
    if not pom.is_file():
        raise StackError(f"Maven pom not found: {pom}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        argv = [
            mvn,
            "-q",
            "-B",
            "--strict-checksums",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={tmp}",
        ]
        argv += [f"-D{k}={v}" for k, v in props.items()]
        procs.run(argv, f"mvn dependency:copy-dependencies ({pom.name})", cwd=POM_DIR, timeout=1800)
        jars = sorted(p.name for p in tmp.glob("*.jar"))
        if not jars:
            raise StackError(f"mvn copied no jars from {pom.name}")
        if dest.exists():
            shutil.rmtree(dest)  # an earlier run that never wrote its marker
        tmp.rename(dest)
        return jars
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _artifact(jar: str) -> tuple[str, str]:
    m = _JAR_RE.match(jar)
    return (m.group("name"), m.group("version")) if m else (jar, "")


def _drop_pyspark_duplicates(dest: Path, jars: list[str]) -> list[str]:
    """Remove any jar whose artifact pyspark/jars already ships (the pom excludes
    the known ones; this catches new transitive deps of future connector versions)."""
    home = pyspark_home()
    if home is None:
        return jars
    shipped = dict(_artifact(p.name) for p in (home / "jars").glob("*.jar"))
    kept = []
    for jar in jars:
        name, _version = _artifact(jar)
        if name in shipped:
            print(f"devstack: note: dropping {jar}: pyspark already ships {name}-{shipped[name]}", file=sys.stderr)
            (dest / jar).unlink()
        else:
            kept.append(jar)
    return kept
