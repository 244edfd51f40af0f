"""Fetch the Kafka broker jars, the Spark Kafka connector jars, Spark's Avro module, Spark's S3A jars, the
schema registry (Apicurio Registry's Quarkus application) and Apache Iceberg's REST catalog server from
Maven Central.

Maven checks every download against its published checksum (``--strict-checksums``). All sets go
to the cache dir (``$AKO_CACHE_DIR``), never the work tree. A
``.complete`` marker written after a successful copy makes later calls a no-op.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
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
AVRO_POM = POM_DIR / "spark-avro.xml"
# Kafka Connect (of the broker's Kafka release) with Debezium's PostgreSQL connector: the CDC source.
DEBEZIUM_VERSION = "3.6.1.Final"
DEBEZIUM_POM = POM_DIR / "debezium-connect.xml"
# Apicurio Registry's Kafka Connect converter (Avro in the Confluent wire format), as a Connect plugin of its
# own (plugin.path, its own class loader). The 2.6 line: Maven Central's 3.x converters lack a jar or their
# parent POM in the Maven registry this project uses (3.0.7-3.3.3 tried).
APICURIO_CONVERTER_VERSION = "2.6.13.Final"
APICURIO_CONVERTER_POM = POM_DIR / "apicurio-converter.xml"
# The spark-avro release to take when the exact one is missing from the Maven registry this project
# uses, per Spark line (found there: 3.5.x, 4.0.0-4.0.2, 4.1.1, 4.2.0; missing: 4.0.3, 4.1.0, 4.1.2).
AVRO_FALLBACK = {"4.0": "4.0.2", "4.1": "4.1.1"}
# The schema registry: Apicurio Registry's own release build of its Quarkus application (the `all`
# tar.gz of io.apicurio:apicurio-registry-app, a "fast-jar" quarkus-app/ directory), see the pom.
APICURIO_VERSION = "3.3.3"
APICURIO_POM = POM_DIR / "apicurio-registry.xml"
APICURIO_ARCHIVE = "apicurio-registry-app-{version}-all.tar.gz"
# The Iceberg REST catalog server: Apache Iceberg's RESTCatalogServer pieces and their dependencies (see
# the pom), with the stack's launcher (scripts/devstack/java) compiled against them.
ICEBERG_REST_VERSION = "1.10.0"
ICEBERG_REST_POM = POM_DIR / "iceberg-rest.xml"
ICEBERG_REST_LAUNCHER = Path(__file__).resolve().parent / "java/org/apache/iceberg/rest/LoopbackRESTCatalogServer.java"
# The AWS SDK v2 version hadoop-aws declares (its `bundle` dependency, hadoop-project's
# aws-java-sdk-v2.version), per Hadoop release: the S3A jars take the SDK's individual modules at
# that version instead of the 500 MB bundle. Hadoop 3.4.1 is in pyspark 4.0.x, 3.4.2 in 4.1.x,
# 3.5.0 in 4.2.x. Hadoop 3.3 (pyspark 3.5.x) builds S3A on the AWS SDK v1: not provided.
# Hadoop 3.4.1 declares 2.24.6, but s3-transfer-manager 2.24.6 is not in the Maven registry in
# use (the bundle is): the whole SDK set is taken at 2.24.8 instead, the next patch release that
# has every module (patch releases of the SDK v2 only add).
AWS_SDK_FOR_HADOOP = {"3.4.1": "2.24.8", "3.4.2": "2.29.52", "3.5.0": "2.35.4"}
S3A_MIN_HADOOP = (3, 4)
AWS_SDK_ENV = "AKO_AWS_SDK_VERSION"
_HADOOP_API_RE = re.compile(r"^hadoop-client-api-(?P<version>\d+(?:\.\d+)+)\.jar$")
_SPARK_CORE_RE = re.compile(r"^spark-core_\d+\.\d+-(?P<version>\d+(?:\.\d+)+\S*)\.jar$")
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10"
TOKEN_PROVIDER_ENV = "AKO_TOKEN_PROVIDER_VERSION"
# The spark-token-provider-kafka release to use when the exact one is missing from the
# Maven registry this project uses, per Spark line ("4.1") and then per major version ("4").
# Found there: 3.5.7, 4.0.0, 4.1.1 and 4.2.0; missing: 4.0.1-4.0.3, 4.1.0, 4.1.2.
# 4.0.0 was linkage-checked against spark-sql-kafka 4.2.0 and pyspark 4.2.0: everything
# resolves except two LogKeys used only in a log line of Kerberos delegation-token fetching,
# which the devstack never uses.
TOKEN_PROVIDER_FALLBACK = {"4.1": "4.1.1", "4": "4.0.0"}
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


def fetch_debezium(version: str = DEBEZIUM_VERSION, quiet: bool = False) -> Path:
    """Ensure Kafka Connect's and Debezium's PostgreSQL connector's jars are cached; return their dir."""
    dest = state.cache_dir() / f"debezium-{version}-kafka-{KAFKA_VERSION}"
    with state.cache_lock(dest):
        if not _complete(dest):
            _log(f"fetching Kafka Connect {KAFKA_VERSION} and Debezium {version} jars into {dest} ...", quiet)
            found = _mvn_copy(DEBEZIUM_POM, dest, {"kafka.version": KAFKA_VERSION, "debezium.version": version})
            _write_marker(dest, {"debezium.version": version, "kafka.version": KAFKA_VERSION, "jars": found})
    return dest


def fetch_apicurio_converter(version: str = APICURIO_CONVERTER_VERSION, quiet: bool = False) -> Path:
    """Ensure Apicurio's Kafka Connect converter is cached as a Connect plugin; return the plugin path (the
    directory holding the plugin's directory of jars)."""
    dest = state.cache_dir() / f"connect-plugins-apicurio-{version}" / "apicurio-converter"
    with state.cache_lock(dest):
        if not _complete(dest):
            _log(f"fetching Apicurio Registry's Kafka Connect converter {version} into {dest} ...", quiet)
            found = _mvn_copy(APICURIO_CONVERTER_POM, dest, {"apicurio.converter.version": version})
            _write_marker(dest, {"apicurio.converter.version": version, "jars": found})
    return dest.parent


def apicurio_dir(version: str = APICURIO_VERSION) -> Path:
    return state.cache_dir() / f"apicurio-registry-{version}"


def fetch_apicurio(version: str = APICURIO_VERSION, quiet: bool = False) -> Path:
    """Ensure Apicurio Registry's application is cached; return its ``quarkus-app`` dir (``quarkus-run.jar``).

    Maven fetches the release archive (about 160 MB, checked against its published checksum); it is
    unpacked (about 170 MB) and deleted. Runs on a JDK 21+ (see ``schema_registry.java_binary``).
    """
    dest = apicurio_dir(version)
    app = dest / "quarkus-app"
    with state.cache_lock(dest):
        if not _complete(dest):
            _log(f"fetching Apicurio Registry {version} (about 160 MB) into {dest} ...", quiet)
            started = time.monotonic()
            files = _mvn_copy(APICURIO_POM, dest, {"apicurio.version": version}, pattern="*.tar.gz")
            archive = dest / APICURIO_ARCHIVE.format(version=version)
            if files != [archive.name]:
                raise StackError(f"mvn copied {files} from {APICURIO_POM.name}, expected only {archive.name}")
            size = archive.stat().st_size
            with tarfile.open(archive) as tar:
                tar.extractall(app, filter="data")  # refuses absolute paths, links out of the dir, devices
            archive.unlink()
            if not (app / "quarkus-run.jar").is_file():
                raise StackError(f"{archive.name} holds no quarkus-run.jar")
            meta = {"apicurio.version": version, "archive": archive.name, "archive_bytes": size}
            _write_marker(dest, {**meta, "seconds": round(time.monotonic() - started, 1)})
    return app


def iceberg_rest_dir(version: str = ICEBERG_REST_VERSION) -> Path:
    """The server's cache, named by the version and by what is built (its POM and launcher): a change
    to either builds it again."""
    built = hashlib.sha256(ICEBERG_REST_POM.read_bytes() + ICEBERG_REST_LAUNCHER.read_bytes()).hexdigest()[:10]
    return state.cache_dir() / f"iceberg-rest-{version}-{built}"


def fetch_iceberg_rest(version: str = ICEBERG_REST_VERSION, quiet: bool = False) -> Path:
    """Ensure the Iceberg REST catalog server's jars (about 30 MB) and the compiled launcher are cached;
    return the dir (``libs/*`` and ``classes/`` make its classpath)."""
    dest = iceberg_rest_dir(version)
    with state.cache_lock(dest):
        if not _complete(dest):
            _log(f"fetching Apache Iceberg {version}'s REST catalog server jars into {dest} ...", quiet)
            libs = dest / "libs"
            found = _mvn_copy(ICEBERG_REST_POM, libs, {"iceberg.version": version})
            javac = procs.require_tool("javac", "install a JDK 17, e.g. apt-get install openjdk-17-jdk-headless")
            classes = dest / "classes"
            argv = [javac, "-nowarn", "-d", str(classes), "-cp", f"{libs}/*", str(ICEBERG_REST_LAUNCHER)]
            procs.run(argv, "javac LoopbackRESTCatalogServer.java", cwd=dest, timeout=300)
            _write_marker(dest, {"iceberg.version": version, "jars": found})
    return dest


def token_provider_fallback(version: str) -> str | None:
    """The token-provider release to try when ``version``'s own is not in the registry (same line first)."""
    parts = version.split(".")
    return TOKEN_PROVIDER_FALLBACK.get(".".join(parts[:2])) or TOKEN_PROVIDER_FALLBACK.get(parts[0])


def fetch_connector(
    spark_version: str | None = None, quiet: bool = False, spark_home: Path | None = None
) -> list[Path]:
    """Ensure the spark-sql-kafka connector jars of one Spark release are cached; return their paths.

    ``spark_home``: the Spark home the jars go with (default: that release's, see
    ``spark_lines.spark_home``, which installs it when missing): jars it already ships are dropped.
    """
    from . import spark_lines  # it imports this module

    version = spark_version or default_spark_version()
    scala = spark_lines.scala_binary_version(version)
    dest = connector_dir(version)
    if not _complete(dest):
        home = spark_home or spark_lines.spark_home(version, quiet=quiet)
        _log(f"fetching spark-sql-kafka-0-10_{scala} {version} jars into {dest} ...", quiet)
        props = {"spark.version": version, "scala.binary.version": scala}
        override = os.environ.get(TOKEN_PROVIDER_ENV)
        if override:
            props["token.provider.version"] = override
        try:
            jars = _mvn_copy(CONNECTOR_POM, dest, props)
        except StackError as exc:
            fallback = token_provider_fallback(version)
            if override or not fallback or TOKEN_PROVIDER not in str(exc):
                raise
            print(
                f"devstack: WARNING: org.apache.spark:{TOKEN_PROVIDER}_{scala}:{version} is not in "
                f"the Maven registry in use; using {fallback} instead (binary compatible for "
                f"everything but Kerberos delegation tokens). Set {TOKEN_PROVIDER_ENV} to "
                f"choose another version.",
                file=sys.stderr,
            )
            props["token.provider.version"] = fallback
            jars = _mvn_copy(CONNECTOR_POM, dest, props)
        jars = _drop_pyspark_duplicates(dest, jars, home)
        meta = {"spark.version": version, "spark_home": str(home), "properties": props, "jars": jars}
        _write_marker(dest, meta)
    meta = json.loads((dest / MARKER).read_text())
    return [dest / name for name in meta["jars"]]


def avro_dir(spark_version: str) -> Path:
    return state.cache_dir() / f"spark-avro-{spark_version}"


def fetch_avro(spark_version: str | None = None, quiet: bool = False) -> list[Path]:
    """Ensure Spark's Avro module (``spark-avro``, for ``from_avro``) of one Spark release is cached; return
    its jar. Its dependencies are all in Spark's own jars."""
    from . import spark_lines  # it imports this module

    version = spark_version or default_spark_version()
    scala = spark_lines.scala_binary_version(version)
    dest = avro_dir(version)
    with state.cache_lock(dest):
        if not _complete(dest):
            _log(f"fetching spark-avro_{scala} {version} into {dest} ...", quiet)
            props = {"spark.version": version, "scala.binary.version": scala}
            try:
                found = _mvn_copy(AVRO_POM, dest, props)
            except StackError:
                fallback = AVRO_FALLBACK.get(".".join(version.split(".")[:2]))
                if not fallback:
                    raise
                _log(f"spark-avro_{scala} {version} is not in the Maven registry in use; taking {fallback}", quiet)
                props["spark.version"] = fallback
                found = _mvn_copy(AVRO_POM, dest, props)
            _write_marker(dest, {"spark.version": version, "properties": props, "jars": found})
    meta = json.loads((dest / MARKER).read_text())
    return [dest / name for name in meta["jars"]]


def spark_version_of(spark_home: Path) -> str | None:
    """The Spark release of a Spark home (its ``jars/spark-core_<scala>-<version>.jar``)."""
    cores = (spark_home / "jars").glob("spark-core_*.jar")
    found = [m.group("version") for p in cores if (m := _SPARK_CORE_RE.match(p.name))]
    return found[0] if len(found) == 1 else None


def hadoop_version(spark_home: Path | None = None) -> str:
    """The Hadoop version inside a Spark home (default: the worker's pyspark), from its
    ``jars/hadoop-client-api-<version>.jar``."""
    home = spark_home or pyspark_home()
    jars = (home / "jars").glob("*.jar") if home else ()
    found = [m.group("version") for p in jars if (m := _HADOOP_API_RE.match(p.name))]
    if len(found) != 1:
        raise StackError(
            f"cannot tell the Hadoop version inside {home or 'pyspark'} (hadoop-client-api jars found: {found})"
        )
    return found[0]


def s3a_dir(hadoop: str, spark_version: str) -> Path:
    """One dir per Hadoop release and Spark release: the jars kept depend on what that Spark ships."""
    return state.cache_dir() / f"spark-s3a-{hadoop}-spark-{spark_version}"


def fetch_s3a(quiet: bool = False, spark_home: Path | None = None) -> list[Path]:
    """Ensure hadoop-aws (at the Spark home's Hadoop version) and the AWS SDK modules it uses are cached.

    ``spark_home``: default the worker's pyspark. A Spark whose Hadoop predates 3.4 (Spark 3.5:
    Hadoop 3.3.4, S3A on the AWS SDK v1) is refused: the stack provides SDK v2 modules only.
    """
    home = spark_home or pyspark_home()
    if home is None:
        raise StackError(f"pyspark with jars/ is not installed in this Python ({sys.executable})")
    spark = spark_version_of(home) or default_spark_version()
    hadoop = hadoop_version(home)
    if tuple(int(p) for p in hadoop.split(".")[:2]) < S3A_MIN_HADOOP:
        line = ".".join(spark.split(".")[:2])
        raise StackError(
            f"no S3A jars for the Spark {line} line: Spark {spark} ships Hadoop {hadoop}, whose S3A is "
            f"built on the AWS SDK v1; the dev stack provides S3A (AWS SDK v2) for Hadoop 3.4+ only "
            f"(Spark 4.0 and newer)"
        )
    sdk = os.environ.get(AWS_SDK_ENV) or AWS_SDK_FOR_HADOOP.get(hadoop)
    if not sdk:
        raise StackError(
            f"no AWS SDK version known for Hadoop {hadoop} (Spark {spark}): set {AWS_SDK_ENV} to the version of "
            f"software.amazon.awssdk:bundle that org.apache.hadoop:hadoop-aws:{hadoop} depends on"
        )
    dest = s3a_dir(hadoop, spark)
    if not _complete(dest):
        _log(f"fetching hadoop-aws {hadoop} and AWS SDK {sdk} modules for Spark {spark} into {dest} ...", quiet)
        props = {"hadoop.version": hadoop, "aws.sdk.version": sdk}
        jars = _drop_pyspark_duplicates(dest, _mvn_copy(S3A_POM, dest, props), home)
        meta = {"hadoop.version": hadoop, "spark.version": spark, "spark_home": str(home), "properties": props}
        _write_marker(dest, {**meta, "jars": jars})
    meta = json.loads((dest / MARKER).read_text())
    return [dest / name for name in meta["jars"]]


def fetch_all(spark_version: str | None = None, quiet: bool = False) -> tuple[Path, list[Path]]:
    """(kafka libs dir, the jars every batch's Spark gets: the Kafka connector's and Spark's Avro module)."""
    connector = fetch_connector(spark_version, quiet=quiet)
    return fetch_kafka(quiet=quiet), [*connector, *fetch_avro(spark_version, quiet=quiet)]


def _complete(dest: Path) -> bool:
    return (dest / MARKER).is_file()


def _write_marker(dest: Path, meta: dict[str, Any]) -> None:
    meta = dict(meta, fetched_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    (dest / MARKER).write_text(json.dumps(meta, indent=2) + "\n")


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"devstack: {msg}", file=sys.stderr, flush=True)


def _mvn_copy(pom: Path, dest: Path, props: dict[str, str], pattern: str = "*.jar") -> list[str]:
    """``mvn dependency:copy-dependencies`` into a temp dir, then move into ``dest``; the names of the
    files copied that match ``pattern``."""
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
        procs.run(argv, f"mvn dependency:copy-dependencies ({pom.name})", cwd=POM_DIR, env=_maven_env(), timeout=1800)
        jars = sorted(p.name for p in tmp.glob(pattern))
        if not jars:
            raise StackError(f"mvn copied no {pattern} from {pom.name}")
        if dest.exists():
            shutil.rmtree(dest)  # an earlier run that never wrote its marker
        tmp.rename(dest)
        return jars
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _maven_env() -> dict[str, str]:
    """Maven with a local repository of the cache's own, not ``~/.m2``: it keeps the poms of the artifacts a pom
    excludes without their jars, and Spark's ``--packages`` (Ivy) reads ``~/.m2`` first, then fails on a pom
    whose jar is not beside it (``download failed: ...kafka-clients.jar``)."""
    repository = state.cache_dir() / "maven-repository"
    options = f"{os.environ.get('MAVEN_OPTS', '')} -Dmaven.repo.local={repository}".strip()
    return {**os.environ, "MAVEN_OPTS": options}


def _artifact(jar: str) -> tuple[str, str]:
    m = _JAR_RE.match(jar)
    return (m.group("name"), m.group("version")) if m else (jar, "")


def _drop_pyspark_duplicates(dest: Path, jars: list[str], spark_home: Path | None) -> list[str]:
    """Remove any jar whose artifact the Spark home's jars/ already ships (the poms exclude the
    known ones; this catches new transitive deps of other releases). ``spark_home`` is the home
    the jars go with: each line ships its own set.

    Jar file names carry no group id, so a name match counts only when the two jars also share a
    class package: pyspark 4.0's ``annotations-17.0.0.jar`` (JetBrains) is not the AWS SDK's
    ``annotations`` module, which S3A needs.
    """
    if spark_home is None:
        return jars
    shipped = {_artifact(p.name)[0]: p for p in (spark_home / "jars").glob("*.jar")}
    kept = []
    for jar in jars:
        name, _ = _artifact(jar)
        twin = shipped.get(name)
        if twin is not None and _class_packages(dest / jar) & _class_packages(twin):
            print(f"devstack: note: dropping {jar}: {spark_home} already ships {twin.name}", file=sys.stderr)
            (dest / jar).unlink()
        else:
            kept.append(jar)
    return kept


def _class_packages(jar: Path) -> set[str]:
    """The packages (directories) of a jar's classes."""
    with zipfile.ZipFile(jar) as archive:
        return {n.rsplit("/", 1)[0] for n in archive.namelist() if n.endswith(".class") and "/" in n}
