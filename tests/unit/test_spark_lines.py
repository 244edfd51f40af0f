"""The dev stack's Spark lines, without installing any: the line table, Scala versions, cache dir
names, ``conf/spark-env.sh``, what is read from pyspark's metadata and spark-submit's banner, and
the jar choices that depend on a line's Spark home (faked here by a directory of jar files)."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

import devstack
from devstack import jars, spark_connect, spark_lines
from devstack.errors import StackError
from devstack.info import StackInfo


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AKO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AKO_STACK_DIR", str(tmp_path / "stack"))
    return tmp_path / "cache"


def test_each_line_has_one_release_and_its_scala_binary_version() -> None:
    assert spark_lines.SPARK_LINES == {"3.5": "3.5.7", "4.0": "4.0.3", "4.1": "4.1.2", "4.2": "4.2.0"}
    scala = {line: spark_lines.scala_binary_version(v) for line, v in spark_lines.SPARK_LINES.items()}
    assert scala == {"3.5": "2.12", "4.0": "2.13", "4.1": "2.13", "4.2": "2.13"}
    assert [spark_lines.line_of(v) for v in spark_lines.SPARK_LINES.values()] == list(spark_lines.SPARK_LINES)


def test_a_line_or_a_release_resolves_to_a_release() -> None:
    assert spark_lines.resolve("4.1") == "4.1.2"
    assert spark_lines.resolve(" 3.5.6 ") == "3.5.6"  # any release of a known major version
    assert spark_lines.resolve(None) == jars.default_spark_version()  # the worker's pyspark
    with pytest.raises(StackError, match="knows Spark 3 and 4"):
        spark_lines.resolve("5.0.0")
    with pytest.raises(StackError, match="not a Spark version or line"):
        spark_lines.resolve("latest")


def test_cache_dirs_keep_lines_apart(cache: Path) -> None:
    releases = list(spark_lines.SPARK_LINES.values())
    homes = [spark_lines.home_dir(v) for v in releases]
    assert homes[0] == cache / "spark-3.5.7" / "site" / "pyspark"
    assert spark_lines.site_dir("4.1.2") == cache / "spark-4.1.2" / "site"
    assert [jars.connector_dir(v).name for v in releases] == [f"spark-connector-{v}" for v in releases]
    assert jars.s3a_dir("3.4.1", "4.0.3") == cache / "spark-s3a-3.4.1-spark-4.0.3"
    assert len({*homes, *(jars.connector_dir(v) for v in releases)}) == 2 * len(releases)


def test_spark_env_sh_puts_the_site_first_on_pythonpath(tmp_path: Path) -> None:
    """What spark-submit's load-spark-env.sh does with it (``set -a`` and source), with and without
    a PYTHONPATH of the caller's."""
    site = tmp_path / "spark 3.5.7" / "site"  # a space, to check the quoting
    text = spark_lines.spark_env_sh(site, "3.5.7")
    assert "pyspark 3.5.7" in text
    conf = tmp_path / "spark-env.sh"
    conf.write_text(text)
    script = f'set -a; . "{conf}"; set +a; python3 -c "import os; print(os.environ[\'PYTHONPATH\'])"'
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    alone = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert alone.stdout.strip() == str(site)
    env["PYTHONPATH"] = "/the/callers"
    both = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert both.stdout.strip() == f"{site}:/the/callers"


def test_submit_env_makes_the_home_load_its_own_spark_env() -> None:
    base = {"SPARK_HOME": "/elsewhere", "SPARK_ENV_LOADED": "1", "SPARK_CONNECT_MODE_ENABLED": "1", "A": "b"}
    env = spark_lines.submit_env(Path("/h/pyspark"), base)
    assert env["SPARK_HOME"] == "/h/pyspark" and env["SPARK_CONF_DIR"] == "/h/pyspark/conf"
    assert "SPARK_ENV_LOADED" not in env and "SPARK_CONNECT_MODE_ENABLED" not in env and env["A"] == "b"


def test_py4j_requirement_comes_from_pyspark_metadata() -> None:
    v35 = "Name: pyspark\nRequires-Dist: py4j==0.10.9.7\nRequires-Dist: numpy<2,>=1.15; extra == 'ml'\n"
    assert spark_lines.py4j_requirement(v35) == "py4j==0.10.9.7"
    v41 = "Requires-Dist: pandas>=2.2.0; extra == 'sql'\nRequires-Dist: py4j <0.10.9.10,>=0.10.9.7\n"
    assert spark_lines.py4j_requirement(v41) == "py4j<0.10.9.10,>=0.10.9.7"
    with pytest.raises(StackError, match="no py4j"):
        spark_lines.py4j_requirement("Requires-Dist: py4j==0.10.9.7; extra == 'x'\n")


def test_the_version_in_spark_submits_banner() -> None:
    banner = "Welcome to\n   /___/ .__/\\_,_/_/ /_/\\_\\   version 3.5.7\n\nUsing Scala version 2.12.18, OpenJDK"
    assert spark_lines.submit_version(banner) == "3.5.7"
    assert spark_lines.submit_version("Error: no") is None


def test_token_provider_fallback_prefers_the_same_line() -> None:
    assert jars.token_provider_fallback("4.1.2") == "4.1.1"
    assert jars.token_provider_fallback("4.0.3") == "4.0.0"
    assert jars.token_provider_fallback("3.5.7") is None


def _jar(path: Path, *classes: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name in classes:
            archive.writestr(name, b"")
    return path


def test_duplicates_are_judged_against_that_lines_home(tmp_path: Path) -> None:
    home, dest = tmp_path / "home", tmp_path / "fetched"
    _jar(home / "jars" / "kafka-clients-3.4.1.jar", "org/apache/kafka/clients/A.class")
    _jar(home / "jars" / "annotations-17.0.0.jar", "org/jetbrains/annotations/NotNull.class")
    _jar(dest / "kafka-clients-3.9.1.jar", "org/apache/kafka/clients/A.class")
    _jar(dest / "annotations-2.24.8.jar", "software/amazon/awssdk/annotations/SdkPublicApi.class")
    _jar(dest / "s3-2.24.8.jar", "software/amazon/awssdk/services/s3/S3Client.class")
    fetched = ["annotations-2.24.8.jar", "kafka-clients-3.9.1.jar", "s3-2.24.8.jar"]
    kept = jars._drop_pyspark_duplicates(dest, fetched, home)
    assert kept == ["annotations-2.24.8.jar", "s3-2.24.8.jar"]  # same name, other classes: kept
    assert sorted(p.name for p in dest.iterdir()) == kept


def _fake_home(root: Path, spark: str, scala: str, hadoop: str) -> Path:
    for name in (f"spark-core_{scala}-{spark}.jar", f"hadoop-client-api-{hadoop}.jar"):
        _jar(root / "jars" / name, "x/A.class")
    return root


def test_a_homes_spark_and_hadoop_versions_come_from_its_jars(tmp_path: Path) -> None:
    home = _fake_home(tmp_path / "pyspark", "4.0.3", "2.13", "3.4.1")
    assert jars.spark_version_of(home) == "4.0.3"
    assert jars.hadoop_version(home) == "3.4.1"
    assert jars.AWS_SDK_FOR_HADOOP["3.4.1"].startswith("2.24.")
    assert jars.AWS_SDK_FOR_HADOOP["3.4.2"] == "2.29.52"


def test_s3a_is_refused_for_the_35_line_by_name(tmp_path: Path, cache: Path) -> None:
    home = _fake_home(tmp_path / "pyspark", "3.5.7", "2.12", "3.3.4")
    with pytest.raises(StackError, match=r"no S3A jars for the Spark 3\.5 line: Spark 3\.5\.7 ships Hadoop 3\.3\.4"):
        jars.fetch_s3a(spark_home=home)
    assert not cache.exists()  # refused before anything was fetched


def test_installed_lists_complete_homes_and_the_workers(cache: Path) -> None:
    for version, complete in (("4.1.2", True), ("3.5.7", True), ("4.0.3", False)):
        (cache / f"spark-{version}").mkdir(parents=True)
        if complete:
            (cache / f"spark-{version}" / jars.MARKER).write_text("{}")
    homes = spark_lines.installed()
    assert homes["3.5.7"] == str(cache / "spark-3.5.7" / "site" / "pyspark")
    assert "4.0.3" not in homes and list(homes) == sorted(homes, key=lambda v: [int(p) for p in v.split(".")])
    worker = jars.pyspark_version()
    if worker and jars.pyspark_home():
        assert homes[worker] == str(jars.pyspark_home())
        assert spark_lines.spark_home(worker) == jars.pyspark_home()  # no install for the worker's line
        assert not (cache / f"spark-{worker}").exists()


def test_connect_servers_of_lines_have_their_own_dirs_and_connection_ids(tmp_path: Path) -> None:
    assert spark_connect.conn_id() == "spark_connect_default"
    assert spark_connect.conn_id("4.1.2") == "spark_connect_4_1_2"
    assert spark_connect.base_dir(tmp_path) == tmp_path / "spark-connect"
    assert spark_connect.base_dir(tmp_path, "4.1.2") == tmp_path / "spark-connect-4.1.2"
    info = StackInfo(
        bootstrap_servers="127.0.0.1:1",
        pg_host="127.0.0.1",
        pg_port=2,
        pg_user="u",
        pg_password="p",
        pg_database="d",
        connector_jars=(),
        kafka_libs_dir="/k",
        spark_master_url=None,
        state_dir=str(tmp_path),
        spark_connect_lines={"4.1.2": {"conn_type": "spark_connect", "host": "localhost", "port": 3}},
    )
    env = info.airflow_env()
    assert '"port": 3' in env["AIRFLOW_CONN_SPARK_CONNECT_4_1_2"]
    assert "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT" not in env


def test_a_spark_version_without_a_connect_server_is_refused(cache: Path) -> None:
    with pytest.raises(StackError, match="--spark-connect"):
        devstack.up(spark_version="4.1")
    assert not cache.exists()


def test_the_documented_connect_server_command_is_the_stacks(tmp_path: Path) -> None:
    """docs/spark.md's command for a Connect server of an older line runs what the stack runs (the server
    class, its binding port setting, the token in the environment), with the connector a Spark 4.0.3
    home gets when no repository answers."""
    import re
    import shlex

    from airflow_kafka_offsets.spark.published import CONNECTOR_ARTIFACTS, KNOWN_RELEASES, nearest_release
    from airflow_kafka_offsets.spark_apps.kafka_batch_contract import connector_coordinates

    text = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    start = text.index("**Starting a server of an older line.**")
    block = re.search(r"```bash\n(?P<body>.*?)^\s*```", text[start:], re.S | re.M)
    assert block is not None
    lines = re.sub(r"\\\n\s*", " ", block["body"]).strip().splitlines()
    export, command = (line.strip() for line in lines)
    assert export.startswith(f"export {spark_connect.TOKEN_ENV}=")
    documented = shlex.split(command)

    cfg = {"spark_home": "/h", "host": "127.0.0.1", "port": 15002, "base_dir": str(tmp_path), "jars": ["a.jar"]}
    stacks = spark_connect.server_argv(cfg)
    assert (documented[0], stacks[0]) == ("$SPARK_HOME/bin/spark-submit", "/h/bin/spark-submit")

    def options(argv: list[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for flag, value in zip(argv[1::2], argv[2::2], strict=False):
            found.setdefault(flag, []).append(value)
        return found

    doc, stack = options(documented), options(stacks)
    assert doc["--class"] == stack["--class"] == [spark_connect.SERVER_CLASS]
    assert doc["--conf"] == ["spark.connect.grpc.binding.port=15002"]
    assert "spark.connect.grpc.binding.port=15002" in stack["--conf"]
    (packages,) = doc["--packages"]
    release = nearest_release("4.0.3", KNOWN_RELEASES[CONNECTOR_ARTIFACTS][("4.0", "2.13")])
    assert release is not None and packages == connector_coordinates(release, "2.13")
