"""How long the S3 clients wait for a silent S3: the package's own requests and Spark's S3A.

The directory sink's manifests are signed requests this worker sends itself
(:mod:`~airflow_kafka_offsets.object_storage.signing`); each socket operation of one waits at most
the object storage connection's extra ``timeout`` (seconds, default 10).

Spark reaches S3 through Hadoop's S3A, whose own defaults let a silent S3 hold a task for hours
(Hadoop 3.3, Spark 3.5's: a 200 s socket timeout, no request timeout, 20 SDK retries inside 7
retries of S3A's own; Hadoop 3.4, Spark 4.x's: 200 s, 60 s per call but 15 min per upload, 5 inside
7). :data:`S3A_DEADLINES` bounds every S3A request, in forms each hadoop-aws of Spark 3.5 to 4.2
reads alike: whole milliseconds for the connection timeouts (Hadoop 3.3 reads them as integers),
a number with its unit for the request timeouts and the retry interval (a bare number is seconds
to Hadoop 3.3 and milliseconds to 3.4). Hadoop 3.4 raises a connection or request timeout below
15 s to 15 s. The connection's extra ``s3a`` (Hadoop's names and units) replaces any of them, and
the task's own ``spark_conf`` wins over both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.connection_form import extra_object, extra_seconds
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import HADOOP_PREFIX

TIMEOUT = "timeout"
"""The connection extra's key: seconds each socket operation of the package's own S3 requests may take."""
REQUEST_TIMEOUT_S = 10.0
S3A = "s3a"
"""The connection extra's key: a JSON object of Hadoop S3A settings for Spark (``fs.s3a.*``)."""
S3A_PREFIX = "fs.s3a."

S3A_DEADLINES: Mapping[str, str] = {
    # ms to open a connection (Hadoop 3.3's default: 5 s; 3.4's: 30 s, and at least 15 s)
    "fs.s3a.connection.establish.timeout": "15000",
    # ms a socket waits for data: a silent S3's answer (default 200 s)
    "fs.s3a.connection.timeout": "30000",
    # one request, its upload included (Hadoop 3.3: default none; 3.4: 60 s for one call with its SDK retries)
    "fs.s3a.connection.request.timeout": "180s",
    # Hadoop 3.4.1+: one upload (PUT or part) instead of the request timeout (default 15 min)
    "fs.s3a.connection.part.upload.timeout": "180s",
    # retries of the AWS SDK inside each of S3A's tries (default 20 on 3.3, 5 on 3.4)
    "fs.s3a.attempts.maximum": "1",
    # S3A's own retries of a failed request (default 7), after 1, 2, 4 s (x 0.5 to 1.5) of backoff
    "fs.s3a.retry.limit": "3",
    "fs.s3a.retry.interval": "500ms",
}
# S3A settings the connection's own fields give; the extra's s3a must not hold them.
FROM_FIELDS: Mapping[str, str] = {
    "fs.s3a.access.key": "the access key id (login)",
    "fs.s3a.secret.key": "the secret access key (password)",
    "fs.s3a.session.token": "aws_session_token",
    "fs.s3a.endpoint": "endpoint_url",
    "fs.s3a.connection.ssl.enabled": "endpoint_url (its scheme)",
    "fs.s3a.endpoint.region": "region_name",
    "fs.s3a.path.style.access": "addressing_style",
}
CREDENTIALS_PROVIDER = "fs.s3a.aws.credentials.provider"


def request_timeout_s(conn_id: str, extra: Mapping[str, Any]) -> float:
    """The extra's ``timeout``, or the default; anything but a number of seconds above 0 is refused."""
    return extra_seconds(extra, TIMEOUT, REQUEST_TIMEOUT_S, f"S3 connection {conn_id!r}")


def s3a_settings(conn_id: str, extra: Mapping[str, Any], has_key: bool) -> tuple[tuple[str, str], ...]:
    """The extra's ``s3a`` settings as text, sorted; refused: keys that are not ``fs.s3a.*``, those the
    connection's fields give (a credentials provider too when it has a key), values not text, a whole
    number or a boolean."""
    connection = f"S3 connection {conn_id!r}"
    settings: dict[str, str] = {}
    for key, value in extra_object(extra, S3A, connection).items():
        if not key.startswith(S3A_PREFIX):
            raise ConfigurationError(f"{connection} has {S3A} key {key!r}: give Hadoop S3A settings ({S3A_PREFIX}*)")
        field = FROM_FIELDS.get(key) or ("the access key id (login)" if has_key and key == CREDENTIALS_PROVIDER else "")
        if field:
            raise ConfigurationError(f"{connection} has {key} in {S3A}: the connection sets it from {field}")
        if isinstance(value, bool):
            value = str(value).lower()
        if not isinstance(value, str | int):
            raise ConfigurationError(
                f"{connection} has {S3A} {key} of type {type(value).__name__}: give text or a whole number"
            )
        settings[key] = str(value)
    return tuple(sorted(settings.items()))


def s3a_deadlines(given: tuple[tuple[str, str], ...], spark_conf: Mapping[str, str]) -> dict[str, str]:
    """:data:`S3A_DEADLINES` with the connection's ``s3a`` settings over them, less any key the task's
    ``spark_conf`` sets itself (``spark.hadoop.<key>``), which then wins."""
    settings = {**S3A_DEADLINES, **dict(given)}
    return {key: value for key, value in settings.items() if HADOOP_PREFIX + key not in spark_conf}
