"""The fault proxy's pure parts: toxic specs as toxiproxy's API takes them, the proxies in front of the
stack's services, the Airflow connections rewritten through them, and the broker's PROXIED listener."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devstack import kafka, toxiproxy
from devstack.toxiproxy_api import Proxy, Toxic, both_ways

STACK = {
    "postgres": {"port": 5001},
    "kafka": {"port": 9001, "proxied_backend_port": 9002, "proxied_port": 9003},
    "s3": {"port": 8001},
    "schema_registry": {"port": 8081},
}


def test_a_toxic_is_the_body_toxiproxy_takes() -> None:
    toxic = Toxic("slow", "latency", "upstream", {"latency": 500, "jitter": 10})
    assert toxic.body() == {
        "name": "slow",
        "type": "latency",
        "stream": "upstream",
        "toxicity": 1.0,
        "attributes": {"latency": 500, "jitter": 10},
    }


def test_both_ways_puts_one_toxic_on_each_stream() -> None:
    assert [(t.name, t.stream, t.attributes) for t in both_ways("cut", "timeout", timeout=0)] == [
        ("cut_up", "upstream", {"timeout": 0}),
        ("cut_down", "downstream", {"timeout": 0}),
    ]


@pytest.mark.parametrize(
    ("kwargs", "refused"),
    [
        ({"type": "blackhole"}, "unknown toxic type 'blackhole'"),
        ({"type": "timeout", "stream": "sideways"}, "upstream or downstream"),
        ({"type": "latency", "attributes": {"timeout": 1}}, r"takes \['jitter', 'latency'\]"),
        ({"type": "reset_peer", "toxicity": 1.5}, "probability"),
    ],
)
def test_a_toxic_toxiproxy_would_not_know_is_refused(kwargs: dict, refused: str) -> None:
    with pytest.raises(ValueError, match=refused):
        Toxic("t", **kwargs)


def test_each_running_service_gets_a_proxy_and_kafkas_listens_on_the_advertised_port() -> None:
    proxies = toxiproxy.layout(STACK, {"postgres": 7001, "s3": 7002, "schema_registry": 7003, "spark_connect": 7004})
    assert proxies == [
        Proxy("postgres", 7001, "127.0.0.1:5001"),
        Proxy("kafka", 9003, "127.0.0.1:9002"),
        Proxy("s3", 7002, "127.0.0.1:8001"),
        Proxy("schema_registry", 7003, "127.0.0.1:8081"),
    ]  # no Spark Connect server runs: no proxy for it
    assert proxies[0].body() == {
        "name": "postgres",
        "listen": "127.0.0.1:7001",
        "upstream": "127.0.0.1:5001",
        "enabled": True,
    }


def test_the_connections_through_the_proxies_name_their_ports() -> None:
    stack = {**STACK, "toxiproxy": {"ports": {"postgres": 7001, "s3": 7002, "schema_registry": 7003}}}
    env = {
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9001"}}
        ),
        "AIRFLOW_CONN_POSTGRES_DEFAULT": json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": 5001}),
        "AIRFLOW_CONN_KAFKA_OFFSETS_S3": json.dumps(
            {"conn_type": "aws", "extra": {"endpoint_url": "http://127.0.0.1:8001"}}
        ),
        "AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT": json.dumps({"host": "http://127.0.0.1:8081/apis/ccompat/v7"}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }
    through = {k: json.loads(v) for k, v in toxiproxy.connections(stack, env).items()}
    assert through == {
        "AIRFLOW_CONN_KAFKA_DEFAULT": {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9003"}},
        "AIRFLOW_CONN_POSTGRES_DEFAULT": {"conn_type": "postgres", "host": "127.0.0.1", "port": 7001},
        "AIRFLOW_CONN_KAFKA_OFFSETS_S3": {"conn_type": "aws", "extra": {"endpoint_url": "http://127.0.0.1:7002"}},
        "AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT": {"host": "http://127.0.0.1:7003/apis/ccompat/v7"},
    }


def test_the_broker_advertises_the_proxys_port_on_its_proxied_listener(tmp_path: Path) -> None:
    cfg = kafka.configure(tmp_path, tmp_path, 9001, 9000, proxied_backend_port=9002, proxied_port=9003)
    props = kafka.server_properties(cfg)
    assert "PROXIED://127.0.0.1:9002" in props["listeners"].split(",")
    assert "PROXIED://127.0.0.1:9003" in props["advertised.listeners"].split(",")
    assert "PROXIED:PLAINTEXT" in props["listener.security.protocol.map"].split(",")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
