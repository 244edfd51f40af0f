from __future__ import annotations

import pytest

from airflow_kafka_offsets.clients.kafka_config import java_client_properties
from airflow_kafka_offsets.errors import ConfigurationError


def test_plain_settings_pass_through_and_consumer_settings_drop():
    props = java_client_properties(
        {"bootstrap.servers": "h:1", "group.id": "g", "enable.auto.commit": False, "security.protocol": "PLAINTEXT"}
    )
    assert props == {"bootstrap.servers": "h:1", "security.protocol": "PLAINTEXT"}


def test_sasl_plain_becomes_jaas():
    props = java_client_properties(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": 'p"w\\d',
        }
    )
    assert props["sasl.mechanism"] == "PLAIN"
    assert props["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="p\\"w\\\\d";'
    )
    assert "sasl.password" not in props and "sasl.username" not in props


def test_scram():
    props = java_client_properties({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "x"})
    assert props["sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule required")


def test_ca_location_becomes_pem_truststore():
    props = java_client_properties({"ssl.ca.location": "/etc/ca.pem"})
    assert props == {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem"}


def test_unsupported_combinations_are_explained():
    with pytest.raises(ConfigurationError, match="GSSAPI"):
        java_client_properties({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})
    with pytest.raises(ConfigurationError, match="keystore"):
        java_client_properties({"ssl.certificate.location": "/c.pem"})


def test_callables_are_dropped():
    assert java_client_properties({"error_cb": print, "oauth_cb": print, "x.y": 1}) == {"x.y": "1"}
