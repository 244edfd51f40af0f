"""A Spark Connect session's keepalive pings: the defaults, the connection extra's values, what gRPC gets,
and a bad value refused naming the connection and the key."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.spark.keepalive import DEFAULT_KEEPALIVE, ConnectKeepalive


def test_the_defaults_ping_after_20_s_of_silence_and_wait_10_s_for_the_answer() -> None:
    assert DEFAULT_KEEPALIVE.channel_options() == [
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
    ]
    assert ConnectKeepalive.from_extra("spark_connect", {"use_ssl": True}) == DEFAULT_KEEPALIVE


def test_the_connection_extra_sets_them_in_seconds() -> None:
    given = ConnectKeepalive.from_extra("spark_connect", {"keepalive_time": "60", "keepalive_timeout": 2.5})
    assert given.channel_options() == [("grpc.keepalive_time_ms", 60_000), ("grpc.keepalive_timeout_ms", 2500)]


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_bad_value_is_refused_naming_the_connection_and_the_key(value: str) -> None:
    with pytest.raises(ConfigurationError, match=f"Spark Connect connection 'sc1' has keepalive_time '{value}'"):
        ConnectKeepalive.from_extra("sc1", {"keepalive_time": value})


def test_the_docs_state_the_defaults() -> None:
    from pathlib import Path

    docs = Path(__file__).parents[2] / "docs"
    time_s, timeout_s = f"{DEFAULT_KEEPALIVE.time_s:g}", f"{DEFAULT_KEEPALIVE.timeout_s:g}"
    connections = (docs / "connections.md").read_text()
    assert f"`keepalive_time` (seconds of silence before the session pings the server, default {time_s})" in connections
    assert f"ping may go unanswered before the connection counts as dead, default {timeout_s})" in connections
    guarantees = (docs / "guarantees.md").read_text()
    assert f"one after {time_s} s of silence, unanswered within {timeout_s} s" in guarantees
