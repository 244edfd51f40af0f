"""The Spark connection read once by hooks/spark.py: the value spark/ runs with, and the refusals that
keep spark-submit from falling back to YARN."""

from __future__ import annotations

import json

import pytest
from airflow.sdk import BaseHook

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks import spark as spark_hook
from airflow_kafka_offsets.hooks.spark import spark_connection
from airflow_kafka_offsets.spark.connect import endpoint
from airflow_kafka_offsets.spark.connection import SparkConnection

TOKEN = "s3cr3t-token"
CONNECT = {"conn_type": "spark_connect", "host": "localhost", "port": 15002, "password": TOKEN}


@pytest.fixture()
def masked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(spark_hook, "mask_secrets", seen.append)
    return seen


def define(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, object]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def test_a_spark_connection_is_read_into_plain_values(
    monkeypatch: pytest.MonkeyPatch, masked: list[tuple[str, ...]]
) -> None:
    extra = {"deploy-mode": "cluster", "spark-binary": "spark3-submit", "keytab": "a2V5dGFi"}
    define(monkeypatch, "spark_yarn", {"conn_type": "spark", "host": "yarn", "port": 8032, "extra": extra})
    conn = spark_connection("spark_yarn")
    assert conn == SparkConnection("spark_yarn", "spark", "yarn", 8032, extra)
    assert not conn.is_connect and conn.url is None
    assert repr(conn) == "SparkConnection(conn_id='spark_yarn', conn_type='spark', host='yarn', port=8032)"
    assert masked == [("a2V5dGFi",)]  # the keytab of the extra
    with pytest.raises(ConfigurationError, match="'spark_yarn' is of type 'spark', not 'spark_connect'"):
        conn.connect_url()


def test_a_spark_connect_connection_gets_the_providers_url_whose_token_stays_out_of_the_repr(
    monkeypatch: pytest.MonkeyPatch, masked: list[tuple[str, ...]]
) -> None:
    define(monkeypatch, "cx", CONNECT)
    conn = spark_connection("cx")
    url = "sc://localhost:15002/;token=s3cr3t-token"
    assert (conn.conn_type, conn.host, conn.port, conn.is_connect, conn.connect_url()) == (
        "spark_connect",
        "localhost",
        15002,
        True,
        url,
    )
    assert TOKEN not in repr(conn) and TOKEN not in str(conn)
    assert endpoint(conn.connect_url()) == "localhost:15002"
    assert masked == [(TOKEN, url)]


def test_a_missing_connection_is_refused_rather_than_left_to_yarn() -> None:
    with pytest.raises(ConfigurationError) as refused:
        spark_connection("spark_missing")
    assert str(refused.value) == (
        "Spark connection 'spark_missing' is not defined in Airflow; define it (e.g. AIRFLOW_CONN_SPARK_MISSING="
        '\'{"conn_type": "spark", "host": "local[2]"}\') rather than letting spark-submit default to YARN'
    )


def test_a_connection_that_cannot_be_read_is_refused_without_quoting_the_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(conn_id: str) -> None:
        raise RuntimeError(f"secrets backend down; it said {TOKEN}")

    monkeypatch.setattr(BaseHook, "get_connection", broken)
    with pytest.raises(ConfigurationError) as refused:
        spark_connection("spark_default")
    assert str(refused.value) == (
        "Spark connection 'spark_default' could not be read from Airflow (RuntimeError; see the cause); "
        "refusing to let spark-submit default to YARN"
    )
    assert isinstance(refused.value.__cause__, RuntimeError)


@pytest.mark.parametrize(
    ("conn", "message"),
    [
        (
            {"conn_type": "spark"},
            "Spark connection 'nohost' has no host: set it to the Spark master (local[2], spark://host:7077, yarn, "
            "k8s://...)",
        ),
        ({"conn_type": "spark", "host": "  "}, "Spark connection 'nohost' has no host"),
        (
            {"conn_type": "spark_connect", "password": TOKEN},
            "Spark Connect connection 'nohost' has no host: set it to the server (e.g. host localhost, port 15002)",
        ),
        ({**CONNECT, "host": "localhost/path"}, "Spark Connect connection 'nohost': Path"),
    ],
)
def test_a_connection_without_a_usable_host_is_refused(
    monkeypatch: pytest.MonkeyPatch, masked: list[tuple[str, ...]], conn: dict[str, object], message: str
) -> None:
    define(monkeypatch, "nohost", conn)
    with pytest.raises(ConfigurationError) as refused:
        spark_connection("nohost")
    assert str(refused.value).startswith(message) and TOKEN not in str(refused.value)
    assert masked == []
