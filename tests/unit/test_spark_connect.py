"""The execution-mode seam and the Spark Connect runner's pure parts (the server itself: integration tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_kafka_offsets.errors import ConfigurationError, SparkDataLossError, SparkJobError
from airflow_kafka_offsets.spark.connect import (
    CONNECT_MODE_ENV,
    SparkConnectRunner,
    connect_job_error,
    connect_mode,
    session_conf,
)
from airflow_kafka_offsets.spark.connection import SparkConnection
from airflow_kafka_offsets.spark.runner import batch_runner
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.submit import SparkBatchSubmitter

JOB = {"pipeline": "orders", "batch_id": 7}
CX = SparkConnection("cx", "spark_connect", "localhost", 15002, url="sc://localhost:15002/;token=s3cr3t-token")
LOCAL = SparkConnection("spark_default", "spark", "local[2]")


def test_the_connection_type_picks_the_execution_mode() -> None:
    assert type(batch_runner(SparkSettings(), LOCAL)) is SparkBatchSubmitter
    runner = batch_runner(SparkSettings(conn_id="cx"), CX)
    assert type(runner) is SparkConnectRunner and runner.connection is CX


def test_the_connect_runner_refuses_submit_only_settings_or_a_connection_of_another_type() -> None:
    with pytest.raises(ConfigurationError, match="executor_memory, num_executors cannot be set"):
        SparkConnectRunner(SparkSettings(conn_id="cx", executor_memory="4g", num_executors=2), CX).check()
    with pytest.raises(ConfigurationError, match="'spark_default' is of type 'spark', not 'spark_connect'"):
        SparkConnectRunner(SparkSettings(), LOCAL).check()


def test_session_conf_is_the_sql_defaults_the_users_conf_and_the_private_hadoop_settings() -> None:
    settings = SparkSettings(
        conf={"spark.sql.shuffle.partitions": "4", "spark.hadoop.parquet.compression.codec.zstd.level": "3"},
        private_conf={"spark.hadoop.fs.s3a.secret.key": "k"},
    )
    assert session_conf(settings) == {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.parquet.compression.codec": "zstd",
        # the Parquet writer's Hadoop settings under their Hadoop names, the user's over the default
        "parquet.compression.codec.zstd.level": "3",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": "4",  # the user's conf over the default
        "fs.s3a.secret.key": "k",  # the Hadoop key, as the app sets it under spark-submit
        "fs.s3a.impl.disable.cache": "true",  # not the server's cached file system of another session
    }
    with pytest.raises(ValueError, match=r"private setting spark.executor.memory"):
        session_conf(SparkSettings(private_conf={"spark.executor.memory": "1g"}))


def test_an_unreachable_server_is_named_with_the_next_step() -> None:
    grpc = RuntimeError(
        "<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses"\n>'
    )
    error = connect_job_error(JOB, "localhost:15002", grpc)
    assert type(error) is SparkJobError
    assert str(error) == (
        "Spark job for batch 7 of pipeline 'orders' failed: the Spark Connect server at localhost:15002 did not "
        "answer (status = StatusCode.UNAVAILABLE); the attempt is lost. Next: check that the server runs and this "
        "worker reaches it (scripts/stack up --spark-connect locally), then retry the read"
    )


def test_a_request_of_the_worker_that_failed_is_not_blamed_on_the_server() -> None:
    """The app's writer-schema lookup runs in the worker on Connect; a refused registry is not a refused server."""
    refused = ConnectionError(
        "the schema registry did not answer for the versions of subject 'orders-value' "
        "(http://127.0.0.1:8081/apis/ccompat/v7: [Errno 111] Connection refused)"
    )
    assert str(connect_job_error(JOB, "localhost:15002", refused)) == (
        "Spark job for batch 7 of pipeline 'orders' failed: a request of this worker failed (ConnectionError: the "
        "schema registry did not answer for the versions of subject 'orders-value' (http://127.0.0.1:8081/apis/"
        "ccompat/v7: [Errno 111] Connection refused)); the attempt is lost (the Spark Connect server is not the "
        "cause). Next: check that the service it names answers this worker, then retry the read"
    )


def test_a_known_cause_in_the_servers_error_is_classified() -> None:
    lost = RuntimeError(
        "[KAFKA_DATA_LOSS] Some data may have been lost because they are not available in Kafka any more\n"
        "Could not read records in offset [150, 300) for topic partition orders-0"
    )
    assert isinstance(connect_job_error(JOB, "localhost:15002", lost), SparkDataLossError)
    other = connect_job_error(JOB, "h:1", ValueError("[PATH_NOT_FOUND] no\nat frame"))
    assert str(other) == (
        "Spark job for batch 7 of pipeline 'orders' failed on the Spark Connect server at h:1: "
        "ValueError: [PATH_NOT_FOUND] no"
    )


def test_the_connect_mark_lasts_only_while_a_batch_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-submit children inherit the mark, and their classic sessions then refuse to start."""
    monkeypatch.delenv(CONNECT_MODE_ENV, raising=False)
    with pytest.raises(RuntimeError), connect_mode():
        assert os.environ[CONNECT_MODE_ENV] == "1"
        raise RuntimeError("the batch failed")
    assert CONNECT_MODE_ENV not in os.environ


def test_a_servers_version_seen_by_a_session_is_trusted_for_a_while_without_the_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow_kafka_offsets.spark import connect

    monkeypatch.setattr(connect.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(connect, "_SERVER_VERSIONS", {})
    url = "sc://spark.example:15002/;token=s3cret"
    connect.remember_server_version(url, "4.1.2")
    monkeypatch.setattr(connect, "_SERVER_VERSIONS", {})  # a new task process
    assert connect.server_version(url) == "4.1.2"  # no session: the example host does not exist
    (written,) = tmp_path.glob("airflow-kafka-offsets-*/connect-server-versions.json")
    assert "s3cret" not in written.read_text() and "spark.example" not in written.read_text()
    assert oct(written.parent.stat().st_mode & 0o777) == oct(0o700)

    monkeypatch.setattr(connect.time, "time", lambda: 10**10)  # long after: asked again
    assert connect._recent_version(url) is None
    written.write_text("{not json")
    assert connect._recent_version(url) is None


def test_the_workers_pyspark_is_found_without_importing_it() -> None:
    import importlib.metadata
    import subprocess
    import sys

    probe = (
        "import sys; from airflow_kafka_offsets.spark.versions import worker_pyspark; found = worker_pyspark(); "
        "print(found.version, 'pyspark' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [importlib.metadata.version("pyspark"), "False"]
