"""S3 access from an ``aws`` connection: the S3A settings, and how they reach Spark (job file, not argv)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook
from airflow_kafka_offsets.object_storage.access import (
    S3Access,
    s3_access,
    s3a_spark_conf,
)
from airflow_kafka_offsets.runtime import spark_settings
from airflow_kafka_offsets.spark import submit as spark_submit
from airflow_kafka_offsets.spark.connect import hadoop_keys_bare, session_conf
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.options import SparkJobOptions
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter, SubmitPlan
from airflow_kafka_offsets.spark.versions import ClusterSpark
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import apply_private_conf

SECRET = "s3cr3t-Key/with+chars"
# S3A's timeouts and retries as every connection gets them, in forms Hadoop 3.3 and 3.4+ read alike.
DEADLINES = {
    "spark.hadoop.fs.s3a.connection.establish.timeout": "15000",
    "spark.hadoop.fs.s3a.connection.timeout": "30000",
    "spark.hadoop.fs.s3a.connection.request.timeout": "180s",
    "spark.hadoop.fs.s3a.connection.part.upload.timeout": "180s",
    "spark.hadoop.fs.s3a.attempts.maximum": "1",
    "spark.hadoop.fs.s3a.retry.limit": "3",
    "spark.hadoop.fs.s3a.retry.interval": "500ms",
}
HADOOP = "spark.hadoop."
TIMES = "\N{MULTIPLICATION SIGN}"
# The shape `scripts/stack env` exports for the local S3 server (AIRFLOW_CONN_KAFKA_OFFSETS_S3).
STACK_EXTRA = {
    "endpoint_url": "http://127.0.0.1:9000",
    "region_name": "us-east-1",
    "config_kwargs": {"s3": {"addressing_style": "path"}},
}


def test_the_stacks_connection_maps_to_exact_s3a_settings() -> None:
    assert s3a_spark_conf(s3_access("s3", "AKOKEY", SECRET, STACK_EXTRA)) == {
        **DEADLINES,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.access.key": "AKOKEY",
        "spark.hadoop.fs.s3a.secret.key": SECRET,
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    }


def test_session_token_uses_temporary_credentials_and_keys_may_sit_in_the_extra() -> None:
    extra = {"aws_access_key_id": "K", "aws_secret_access_key": SECRET, "aws_session_token": "TOKEN"}
    conf = s3a_spark_conf(s3_access("s3", None, None, extra))
    assert conf["spark.hadoop.fs.s3a.session.token"] == "TOKEN"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == SECRET
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == (
        "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    )


def test_aws_without_endpoint_uses_the_default_chain_and_virtual_hosts() -> None:
    assert s3_access("s3", None, None, {}) == S3Access()
    assert s3a_spark_conf(S3Access()) == {
        **DEADLINES,
        "spark.hadoop.fs.s3a.path.style.access": "false",
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    conf = s3a_spark_conf(s3_access("s3", None, None, {"region_name": "eu-west-1"}))
    assert conf == {
        **DEADLINES,
        "spark.hadoop.fs.s3a.path.style.access": "false",
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
    }


def test_s3_service_endpoint_wins_and_https_enables_ssl_and_auto_means_path_style() -> None:
    extra = {"endpoint_url": "http://other:1", "service_config": {"s3": {"endpoint_url": "https://s3.example:443"}}}
    access = s3_access("s3", "K", SECRET, extra)
    assert (access.endpoint_url, access.region, access.path_style) == ("https://s3.example:443", "us-east-1", True)
    assert s3a_spark_conf(access)["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    virtual = s3_access("s3", "K", SECRET, {**extra, "config_kwargs": {"s3": {"addressing_style": "virtual"}}})
    assert virtual.path_style is False


@pytest.mark.parametrize(
    ("login", "password", "extra", "message"),
    [
        ("K", None, {}, "S3 connection 'lake' has no secret access key (password): give both or neither"),
        (None, SECRET, {}, "S3 connection 'lake' has no access key id (login): give both or neither"),
        (None, None, {"aws_session_token": "T"}, "has a session token (aws_session_token) but no access key id and"),
        ("K", SECRET, {"endpoint_url": "127.0.0.1:9000"}, "endpoint_url '127.0.0.1:9000': give http(s)://host[:port]"),
        ("K", SECRET, {"config_kwargs": {"s3": {"addressing_style": "dns"}}}, "addressing_style 'dns': use 'path'"),
    ],
)
def test_bad_connections_are_refused_naming_the_field(
    login: str | None, password: str | None, extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        s3_access("lake", login, password, extra)
    assert message in str(info.value) and SECRET not in str(info.value)


def test_repr_of_access_hides_the_secret_and_token() -> None:
    text = repr(s3_access("s3", "K", SECRET, {"aws_session_token": "TOKEN-XYZ"}))
    assert "K" in text and SECRET not in text and "TOKEN-XYZ" not in text


def test_connection_is_read_from_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "aws", "login": "AKOKEY", "password": SECRET, "extra": STACK_EXTRA}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(conn))
    assert ObjectStorageHook("lake").get_spark_conf() == s3a_spark_conf(
        s3_access("lake", "AKOKEY", SECRET, STACK_EXTRA)
    )
    with pytest.raises(ConfigurationError, match="S3 connection 'missing_conn' is not defined in Airflow"):
        ObjectStorageHook("missing_conn").get_spark_conf()


class FakeHadoopConf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


def test_the_app_sets_private_settings_without_the_spark_hadoop_prefix() -> None:
    hadoop = FakeHadoopConf()
    apply_private_conf({"private_conf": {"spark.hadoop.fs.s3a.secret.key": SECRET}}, hadoop)
    assert hadoop.values == {"fs.s3a.secret.key": SECRET}
    apply_private_conf({}, hadoop)  # jobs without private settings (older packages) change nothing
    assert hadoop.values == {"fs.s3a.secret.key": SECRET}
    with pytest.raises(ValueError, match=r"private setting spark.driver.memory is not spark.hadoop"):
        apply_private_conf({"private_conf": {"spark.driver.memory": "1g"}}, hadoop)


def test_the_tasks_spark_conf_wins_over_the_connections_s3a_which_wins_over_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In both execution modes: spark-submit puts the task's conf on the command line and the app applies
    the private settings after it; a Connect session gets both as its conf, the private ones last."""
    extra = {**STACK_EXTRA, "s3a": {"fs.s3a.retry.limit": "5", "fs.s3a.connection.timeout": "60000"}}
    conn = {"conn_type": "aws", "login": "AKOKEY", "password": SECRET, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(conn))
    # the default connection id, even where a stack's environment names its own (another test set it up)
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID", "aws_default")
    mine = {"spark.hadoop.fs.s3a.connection.timeout": "90000", "spark.hadoop.fs.s3a.attempts.maximum": "4"}
    settings = spark_settings(SparkJobOptions(conf=mine), "s3://lake/out")
    assert settings.conf == mine
    assert {k: v for k, v in settings.private_conf.items() if k in DEADLINES} == {
        "spark.hadoop.fs.s3a.connection.establish.timeout": "15000",
        "spark.hadoop.fs.s3a.connection.request.timeout": "180s",
        "spark.hadoop.fs.s3a.connection.part.upload.timeout": "180s",
        "spark.hadoop.fs.s3a.retry.limit": "5",  # the connection's
        "spark.hadoop.fs.s3a.retry.interval": "500ms",
    }
    submitted = FakeHadoopConf()
    submitted.values.update(hadoop_keys_bare(mine))  # what spark-submit's --conf spark.hadoop.* set
    apply_private_conf({"private_conf": dict(settings.private_conf)}, submitted)
    for hadoop in (submitted.values, session_conf(settings)):
        assert {k: hadoop[k.removeprefix("spark.hadoop.")] for k in DEADLINES} == {
            **DEADLINES,
            "spark.hadoop.fs.s3a.connection.timeout": "90000",
            "spark.hadoop.fs.s3a.attempts.maximum": "4",
            "spark.hadoop.fs.s3a.retry.limit": "5",
        }
    assert ObjectStorageHook().get_spark_conf()["spark.hadoop.fs.s3a.connection.timeout"] == "60000"


def test_the_docs_state_the_deadlines_and_the_bounds_they_give() -> None:
    """The table of docs/connections.md, and its worst cases computed from the values: S3A's tries times the
    SDK's attempts times the wait, plus S3A's backoffs (interval x 2, 4, 8 ... at most x 1.5 each)."""
    page = (Path(__file__).parents[2] / "docs" / "connections.md").read_text()
    table = dict(re.findall(r"^\| `(fs\.s3a\.[a-z.]+)` \| `([^`]+)` \|", page, re.MULTILINE))
    assert {HADOOP + k: v for k, v in table.items()} == DEADLINES
    tries, attempts = int(table["fs.s3a.retry.limit"]) + 1, int(table["fs.s3a.attempts.maximum"]) + 1
    interval_s = int(table["fs.s3a.retry.interval"].removesuffix("ms")) / 1000
    backoff_s = sum(interval_s * 2 ** (retry + 1) * 1.5 for retry in range(tries - 1))
    text = " ".join(page.split())
    for wait_s in (
        int(table["fs.s3a.connection.timeout"]) / 1000,
        int(table["fs.s3a.connection.request.timeout"][:-1]),
    ):
        bound_s = tries * attempts * wait_s + backoff_s
        product = f"{tries} {TIMES} {attempts} {TIMES} {wait_s:g} s + {backoff_s:g} s"
        assert product in text and f"= {bound_s:g} s" in text


LOCAL_SPARK = SparkConnection("spark_default", "spark", "local[2]")


def test_private_settings_other_than_hadoop_ones_are_refused() -> None:
    settings = SparkSettings(jars=("/nonexistent.jar",), private_conf={"spark.executor.memory": "2g"})
    with pytest.raises(ConfigurationError, match=r"private Spark settings must be spark.hadoop.*: spark.executor"):
        SparkBatchSubmitter(settings, LOCAL_SPARK).check()


def test_the_secret_travels_in_the_job_file_and_never_in_the_submit_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The hook builds the real spark-submit command (from the connection it reads itself); only starting
    the process is replaced."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setattr(
        SparkBatchSubmitter,
        "check",
        lambda self: SubmitPlan("spark-submit", ClusterSpark("4.2.0", "2.13", "t"), (), ()),
    )
    private = s3a_spark_conf(s3_access("s3", "AKOKEY", SECRET, STACK_EXTRA))
    seen: dict[str, Any] = {}
    hook_class = spark_submit._diagnosing_hook_class()

    def capture(hook: Any, application: str = "", **kwargs: Any) -> None:
        seen["argv"] = hook._build_spark_submit_command(application)
        job_file = Path(hook._application_args[hook._application_args.index("--job-file") + 1])
        seen["mode"] = job_file.stat().st_mode & 0o777
        seen["job"] = json.loads(job_file.read_text())
        seen["env"] = kwargs.get("env", {})

    monkeypatch.setattr(hook_class, "submit", capture)
    job = {"format": 1, "pipeline": "p", "batch_id": 1, "attempt_id": "a1", "kafka": {}, "ranges": []}
    SparkBatchSubmitter(SparkSettings(conf={"spark.x": "1"}, private_conf=private), LOCAL_SPARK)(job)

    argv = " ".join(seen["argv"])
    assert "spark.x=1" in argv and "--files" in argv  # the command was really built
    assert SECRET not in argv and "fs.s3a" not in argv
    assert SECRET not in json.dumps(seen["env"])
    assert seen["mode"] == 0o600
    assert seen["job"]["private_conf"] == private
    assert {k: v for k, v in seen["job"].items() if k != "private_conf"} == job
