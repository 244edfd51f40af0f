from __future__ import annotations

import base64

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


def certificate(n: int) -> str:
    """A PEM certificate block (the translation checks the armour, not the DER inside)."""
    body = base64.b64encode(f"certificate {n} ".encode() * 40).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join(["-----BEGIN CERTIFICATE-----", *lines, "-----END CERTIFICATE-----"])


def test_ca_location_becomes_pem_certificates_that_travel_with_the_job(tmp_path):
    """The CA file is read on the worker: Spark gets its certificates as text, no path."""
    ca = tmp_path / "ca.pem"
    ca.write_text(certificate(1) + "\n")
    props = java_client_properties({"ssl.ca.location": str(ca)})
    assert props == {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": certificate(1) + "\n"}
    assert str(ca) not in "".join(props.values())


def test_a_ca_bundle_keeps_every_certificate_and_drops_the_text_around_them(tmp_path):
    bundle = tmp_path / "bundle.crt"
    bundle.write_text(
        f"# Issuer: CN=First\n{certificate(1)}\n\nCertificate:\n    Data: (openssl x509 -text)\n{certificate(2)}\n"
    )
    props = java_client_properties({"ssl.ca.location": str(bundle)})
    assert props["ssl.truststore.certificates"] == f"{certificate(1)}\n{certificate(2)}\n"


def test_ca_pem_inline_and_ca_location_are_both_trusted(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(certificate(1))
    props = java_client_properties({"ssl.ca.location": str(ca), "ssl.ca.pem": certificate(2)})
    both = f"{certificate(1)}\n{certificate(2)}\n"
    assert props == {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": both}


def test_ca_location_probe_leaves_the_jvms_default_trust_store():
    assert java_client_properties({"security.protocol": "SSL", "ssl.ca.location": "probe"}) == {
        "security.protocol": "SSL"
    }


def test_a_ca_location_that_cannot_be_used_is_refused_naming_it(tmp_path):
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigurationError, match=f"ssl.ca.location '{missing}'.*cannot be read.*No such file"):
        java_client_properties({"ssl.ca.location": str(missing)})
    with pytest.raises(ConfigurationError, match=r"cannot be read.*Is a directory"):
        java_client_properties({"ssl.ca.location": str(tmp_path)})
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82\x01\x0a" + bytes(range(256)))
    with pytest.raises(ConfigurationError, match="holds no PEM certificate"):
        java_client_properties({"ssl.ca.location": str(der)})
    with pytest.raises(ConfigurationError, match=r"ssl\.ca\.pem .*holds no PEM certificate"):
        java_client_properties({"ssl.ca.pem": "not a certificate"})


def test_sasl_ssl_with_scram_and_a_ca(tmp_path):
    """The stack's SASL_SSL listener as a confluent-kafka config, in Java client settings."""
    ca = tmp_path / "ca.pem"
    ca.write_text(certificate(7))
    props = java_client_properties(
        {
            "bootstrap.servers": "127.0.0.1:9094",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "ako-scram",
            "sasl.password": "s3cr=t;",
            "ssl.ca.location": str(ca),
        }
    )
    assert props == {
        "bootstrap.servers": "127.0.0.1:9094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="ako-scram" password="s3cr=t;";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": certificate(7) + "\n",
    }


@pytest.mark.parametrize(("librdkafka", "java"), [("none", ""), ("NONE", ""), ("https", "https"), ("", "")])
def test_endpoint_identification_none_is_the_java_clients_empty_value(librdkafka, java):
    props = java_client_properties({"ssl.endpoint.identification.algorithm": librdkafka})
    assert props == {"ssl.endpoint.identification.algorithm": java}


def test_unsupported_combinations_are_explained():
    with pytest.raises(ConfigurationError, match="GSSAPI"):
        java_client_properties({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})
    with pytest.raises(ConfigurationError, match="keystore"):
        java_client_properties({"ssl.certificate.location": "/c.pem"})


def test_callables_are_dropped():
    assert java_client_properties({"error_cb": print, "oauth_cb": print, "x.y": 1}) == {"x.y": "1"}
