"""S3 access from an Airflow connection, as Spark's S3A settings (``spark.hadoop.fs.s3a.*``).

The connection is of the provider's own type (its form: :mod:`~airflow_kafka_offsets.object_storage.connection`)
or of the Amazon provider's ``aws`` type, so users of that provider define it once. Both are read
alike: login = access key id, password = secret access key (or ``aws_access_key_id`` /
``aws_secret_access_key`` in the extra), and in the extra ``aws_session_token``, ``region_name``,
``endpoint_url`` (or ``service_config: {"s3": {"endpoint_url": ...}}``) and ``addressing_style``
(or ``config_kwargs: {"s3": {"addressing_style": ...}}``): ``path``, ``virtual`` or ``auto``; ``timeout`` and
``s3a`` bound how long the clients wait (:mod:`~airflow_kafka_offsets.object_storage.deadlines`). The settings hold the
secret: hand them to :class:`~airflow_kafka_offsets.spark.submit.SparkSettings` as
``private_conf``, which ships them in the private job file, never on the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.connection import (
    ADDRESSING_STYLE,
    ADDRESSING_STYLES,
    ENDPOINT_URL,
    REGION,
    SESSION_TOKEN,
)
from airflow_kafka_offsets.object_storage.deadlines import (
    REQUEST_TIMEOUT_S,
    request_timeout_s,
    s3a_deadlines,
    s3a_settings,
)
from airflow_kafka_offsets.object_storage.refusals import CONNECTION_HINT
from airflow_kafka_offsets.object_storage.signing import S3Credentials
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import HADOOP_PREFIX

S3_SCHEMES = ("s3", "s3a")
SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
# S3A needs a region to sign with; S3-compatible servers on a custom endpoint rarely care which.
DEFAULT_ENDPOINT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Access:
    """Who to be and where S3 is; no key means S3A's own credential chain (environment, instance role)."""

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    endpoint_url: str | None = None
    region: str | None = None
    path_style: bool = False
    request_timeout_s: float = REQUEST_TIMEOUT_S  # each socket operation of the package's own requests
    s3a: tuple[tuple[str, str], ...] = ()  # the connection's S3A settings over the package's deadlines


def is_object_store(location: str) -> bool:
    """``s3://`` or ``s3a://`` (both are read by S3A in Spark, see :func:`s3a_spark_conf`)."""
    return urlsplit(location).scheme in S3_SCHEMES


def _nested(extra: Mapping[str, Any], *keys: str) -> Any:
    value: Any = extra
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def s3_access(conn_id: str, login: str | None, password: str | None, extra: Mapping[str, Any]) -> S3Access:
    """Read an S3 connection's fields; refuses a half-given key or an endpoint that is not http(s)."""
    access_key = login or extra.get("aws_access_key_id") or None
    secret_key = password or extra.get("aws_secret_access_key") or None
    if bool(access_key) != bool(secret_key):
        missing = "secret access key (password)" if access_key else "access key id (login)"
        raise ConfigurationError(f"S3 connection {conn_id!r} has no {missing}: give both or neither")
    session_token = extra.get(SESSION_TOKEN) or None
    if session_token and not access_key:
        raise ConfigurationError(
            f"S3 connection {conn_id!r} has a session token ({SESSION_TOKEN}) but no access key id and secret"
        )
    endpoint = _nested(extra, "service_config", "s3", ENDPOINT_URL) or extra.get(ENDPOINT_URL) or None
    if endpoint is not None:
        parts = urlsplit(str(endpoint))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"S3 connection {conn_id!r} has {ENDPOINT_URL} {endpoint!r}: give http(s)://host[:port]"
            )
    style = _nested(extra, "config_kwargs", "s3", ADDRESSING_STYLE) or extra.get(ADDRESSING_STYLE) or "auto"
    if style not in ADDRESSING_STYLES:
        raise ConfigurationError(
            f"S3 connection {conn_id!r} has {ADDRESSING_STYLE} {style!r}: use 'path', 'virtual' or 'auto'"
        )
    return S3Access(
        access_key=access_key,
        secret_key=secret_key,
        session_token=session_token,
        endpoint_url=str(endpoint) if endpoint else None,
        region=extra.get(REGION) or (DEFAULT_ENDPOINT_REGION if endpoint else None),
        # 'auto' on a custom endpoint means path style: host:port servers have no per-bucket host names
        path_style=style == "path" or (style == "auto" and endpoint is not None),
        request_timeout_s=request_timeout_s(conn_id, extra),
        s3a=s3a_settings(conn_id, extra, has_key=bool(access_key)),
    )


def s3a_spark_conf(access: S3Access, spark_conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings (``spark.hadoop.fs.s3a.*``) for S3A; they include the secret when there is one.

    The deadlines (:mod:`~airflow_kafka_offsets.object_storage.deadlines`) leave out any key that
    ``spark_conf``, the task's own Spark settings, gives: these are applied after it and would replace it.
    """
    conf: dict[str, str] = {
        **s3a_deadlines(access.s3a, spark_conf or {}),
        "fs.s3a.path.style.access": str(access.path_style).lower(),
        # s3:// URIs too (the form PyIceberg, delta-rs and Arrow use): one location, every reader.
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    if access.access_key and access.secret_key:
        conf["fs.s3a.access.key"] = access.access_key
        conf["fs.s3a.secret.key"] = access.secret_key
        conf["fs.s3a.aws.credentials.provider"] = SIMPLE_PROVIDER
        if access.session_token:
            conf["fs.s3a.session.token"] = access.session_token
            conf["fs.s3a.aws.credentials.provider"] = TEMPORARY_PROVIDER
    if access.endpoint_url:
        conf["fs.s3a.endpoint"] = access.endpoint_url
        conf["fs.s3a.connection.ssl.enabled"] = str(urlsplit(access.endpoint_url).scheme == "https").lower()
    if access.region:
        conf["fs.s3a.endpoint.region"] = access.region
    return {HADOOP_PREFIX + key: value for key, value in conf.items()}


def signing_credentials(access: S3Access, location: str) -> S3Credentials:
    """The key and endpoint to sign requests that pyarrow cannot make (conditional puts) at ``location``."""
    if not (access.access_key and access.secret_key):
        raise ConfigurationError(
            f"{location} is on S3 and its manifests are written with a signed conditional put, which needs an "
            f"access key id and secret in {CONNECTION_HINT} (it has none)"
        )
    region = access.region or DEFAULT_ENDPOINT_REGION
    endpoint = access.endpoint_url or f"https://s3.{region}.amazonaws.com"
    return S3Credentials(endpoint.rstrip("/"), access.access_key, access.secret_key, region, access.session_token)
