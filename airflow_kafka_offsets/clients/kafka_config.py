"""Turn a confluent-kafka (librdkafka) client config into Java client properties for Spark.

The Airflow Kafka connection holds librdkafka settings (the apache-kafka
provider's convention); Spark's Kafka source takes Java client settings.
Most names are shared; credentials and certificates are not.

Trusted CA certificates (``ssl.ca.location``, ``ssl.ca.pem``) travel as PEM text
(``ssl.truststore.type=PEM``, ``ssl.truststore.certificates``, Java clients >= 2.7), read here
on the worker: the CA file need not exist where Spark's executors run, and the text goes
with the job's other Kafka settings (the private job file, or the Connect session's reader
options), never on a command line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_kafka_offsets.errors import ConfigurationError

# Consumer-group and client-side settings Spark sets itself or that mean nothing to a batch read.
DROPPED = frozenset(
    {
        "group.id",
        "enable.auto.commit",
        "auto.offset.reset",
        "isolation.level",
        "enable.partition.eof",
        "error_cb",
        "logger",
        "stats_cb",
        "throttle_cb",
        "oauth_cb",
        "debug",
        "log_level",
    }
)
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"
# librdkafka's ssl.ca.location=probe: the system's CA certificates; the Java client's default trust
# store (the JVM's cacerts) is its counterpart, so nothing is set.
CA_PROBE = "probe"
PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----")


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_properties(config: Mapping[str, Any]) -> dict[str, str]:
    """Java Kafka client properties equivalent to a librdkafka config (without the ``kafka.`` prefix)."""
    props: dict[str, str] = {}
    source = dict(config)
    mechanism = source.pop("sasl.mechanisms", None) or source.pop("sasl.mechanism", None)
    username = source.pop("sasl.username", None)
    password = source.pop("sasl.password", None)
    if mechanism:
        props["sasl.mechanism"] = str(mechanism)
    if username is not None or password is not None:
        mech = str(mechanism or "PLAIN").upper()
        if mech == "PLAIN":
            module = PLAIN_JAAS
        elif mech.startswith("SCRAM-"):
            module = SCRAM_JAAS
        else:
            raise ConfigurationError(f"sasl.username/sasl.password are not supported with sasl.mechanism {mech}")
        props["sasl.jaas.config"] = (
            f"{module} required username={_jaas_quote(str(username or ''))}"
            f" password={_jaas_quote(str(password or ''))};"
        )
    certificates = trusted_certificates(source.pop("ssl.ca.location", None), source.pop("ssl.ca.pem", None))
    if certificates:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.certificates"] = certificates
    if str(source.get("ssl.endpoint.identification.algorithm", "")).lower() == "none":
        source["ssl.endpoint.identification.algorithm"] = ""  # librdkafka's "none" is the Java client's ""
    cert = source.pop("ssl.certificate.location", None)
    key = source.pop("ssl.key.location", None)
    if cert or key:
        raise ConfigurationError(
            "client certificates (ssl.certificate.location / ssl.key.location) must be given to Spark as a "
            "keystore: set ssl.keystore.location / ssl.keystore.type in the connection extra instead"
        )
    for name, value in source.items():
        if name in DROPPED or callable(value):
            continue
        props[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return props


def trusted_certificates(ca_location: Any, ca_pem: Any) -> str | None:
    """The PEM text of the CA certificates librdkafka's ``ssl.ca.location`` (a PEM file; ``probe``: the
    system's, here the JVM's default trust store) and ``ssl.ca.pem`` name, or None when there are none.

    Only the certificate blocks are kept (a bundle's comments and text dumps are left out); a file
    that cannot be read or holds no PEM certificate is refused naming the setting and the path.
    """
    blocks: list[str] = []
    location = str(ca_location).strip() if ca_location else ""
    if location and location != CA_PROBE:
        path = Path(location)
        try:
            text = path.read_text(encoding="ascii", errors="replace")
        except OSError as exc:
            raise ConfigurationError(
                f"ssl.ca.location {location!r} of the Kafka connection cannot be read on this worker "
                f"({exc.strerror or type(exc).__name__}): it must be a PEM file of CA certificates here; Spark gets "
                "its certificates from it, so it need not exist where Spark runs"
            ) from None
        found = PEM_CERTIFICATE.findall(text)
        if not found:
            raise ConfigurationError(
                f"ssl.ca.location {location!r} of the Kafka connection holds no PEM certificate "
                "(-----BEGIN CERTIFICATE-----); convert a DER file with `openssl x509 -inform der -in CA -out CA.pem`"
            )
        blocks.extend(found)
    if ca_pem:
        found = PEM_CERTIFICATE.findall(str(ca_pem))
        if not found:
            raise ConfigurationError(
                "ssl.ca.pem of the Kafka connection holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            )
        blocks.extend(found)
    return "\n".join(blocks) + "\n" if blocks else None
