"""Turn a confluent-kafka (librdkafka) client config into Java client properties for Spark.

The Airflow Kafka connection holds librdkafka settings (the apache-kafka
provider's convention); Spark's Kafka source takes Java client settings.
Most names are shared; credentials and certificates are not.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    ca = source.pop("ssl.ca.location", None)
    if ca:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = str(ca)
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
