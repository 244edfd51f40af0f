"""The provider's own connection type for S3-compatible object storage, defined once for Airflow's
connection form (``get_provider_info()["connection-types"]``) and for the code that reads it.

Airflow 3.2 and later render a connection form from the provider info (``conn-fields`` with JSON
schema, ``ui-field-behaviour``) without importing the hook; the fields are stored in the
connection's extra under the keys below, which are the keys of the Amazon provider's ``aws``
connection, so both types are read by the same code. Only the addressing style is flat here (the
``aws`` type nests it in ``config_kwargs.s3.addressing_style``).
"""

from __future__ import annotations

from typing import Any

from airflow_kafka_offsets.core.connection_form import ConnectionForm, text_field
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.deadlines import REQUEST_TIMEOUT_S, S3A, TIMEOUT

CONN_TYPE = "kafka_offsets_object_storage"
AWS_CONN_TYPE = "aws"
HOOK_NAME = "S3-compatible object storage (Kafka Offsets)"
HOOK_CLASS = "airflow_kafka_offsets.hooks.object_storage.ObjectStorageHook"

ENDPOINT_URL = "endpoint_url"
REGION = "region_name"
ADDRESSING_STYLE = "addressing_style"
SESSION_TOKEN = "aws_session_token"
ADDRESSING_STYLES = ("auto", "path", "virtual")

FIELDS: dict[str, dict[str, Any]] = {
    ENDPOINT_URL: text_field(
        "Endpoint URL",
        "The S3 API of an S3-compatible server (MinIO, SeaweedFS, Ceph, Cloudflare R2 ...) as "
        "http(s)://host[:port], e.g. http://minio:9000. Leave empty for Amazon S3 itself.",
    ),
    REGION: text_field(
        "Region",
        "The region requests are signed for, e.g. eu-west-1. Empty: us-east-1 on a custom "
        "endpoint (most S3-compatible servers accept any), or the AWS SDK's own lookup on Amazon S3.",
    ),
    ADDRESSING_STYLE: {
        "label": "Addressing style",
        "description": "path: http(s)://endpoint/bucket/key, what servers on a host:port need. virtual: "
        "http(s)://bucket.endpoint/key. auto: path style with an endpoint URL, virtual without.",
        "schema": {"type": "string", "enum": list(ADDRESSING_STYLES), "default": "auto"},
    },
    SESSION_TOKEN: text_field(
        "Session token",
        "Only for temporary credentials (AWS STS); they need the access key ID and the secret too.",
        secret=True,
    ),
    TIMEOUT: text_field(
        "Request timeout (seconds)",
        "How long each wait of a request this worker sends S3 itself (a batch manifest's read or write) "
        "may last before the step fails; a write whose answer was lost is found by the retry. "
        f"Empty: {REQUEST_TIMEOUT_S:g}.",
    ),
    S3A: text_field(
        "Spark S3A settings",
        "A JSON object of Hadoop S3A settings for Spark, over the package's timeouts and retries, e.g. "
        '{"fs.s3a.connection.timeout": "60000", "fs.s3a.retry.limit": "5"}. A task\'s own spark_conf wins.',
    ),
}
FORM = ConnectionForm(
    CONN_TYPE,
    HOOK_CLASS,
    HOOK_NAME,
    hidden_fields=("host", "port", "schema", "extra"),
    relabeling={"login": "Access key ID", "password": "Secret access key"},
    placeholders={
        "login": "e.g. AKIAIOSFODNN7EXAMPLE; empty with the secret: the AWS SDK's own credentials "
        "(environment, instance role)",
        "password": "the key's secret; empty together with the access key ID",
    },
    fields=FIELDS,
)


def connection_type_info() -> dict[str, Any]:
    """The ``connection-types`` entry of the provider info: the form Airflow's UI shows for the type."""
    return FORM.provider_entry()


def check_conn_type(conn_id: str, conn_type: str | None) -> None:
    """Refuse a connection of another kind (a postgres login is no access key): name both accepted types."""
    if conn_type not in (CONN_TYPE, AWS_CONN_TYPE):
        raise ConfigurationError(
            f"S3 connection {conn_id!r} has type {conn_type!r}: give it type {CONN_TYPE!r} ({HOOK_NAME}) "
            f"or {AWS_CONN_TYPE!r} (the Amazon provider's)"
        )
