"""An Iceberg REST catalog from an Airflow connection: the provider's connection type (its form, declared
in the provider info so Airflow's UI draws it without importing the hook) and the PyIceberg
``RestCatalog`` properties it gives.

Any server of the Iceberg REST catalog protocol: Apache Polaris / Snowflake Open Catalog, AWS Glue's
and S3 Tables' Iceberg endpoints (SigV4, through ``properties``), Databricks Unity Catalog, Nessie,
Lakekeeper, Gravitino, Apache Iceberg's own server. The connection holds the catalog's URI in
``host``, an OAuth2 client id and secret in ``login`` and ``password`` (the client-credentials grant,
at the catalog's ``/v1/oauth/tokens`` or ``oauth2_server_uri``) or a bearer token in the extra, and
optionally the warehouse, prefix, scope, extra HTTP headers, the S3 endpoint and region, and further
PyIceberg catalog properties. Storage credentials come from the catalog when it vends them (the
request header ``X-Iceberg-Access-Delegation: vended-credentials`` is sent), else from the
pipeline's object storage connection. The secrets stay in the returned config: never in a message
or a repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_offsets.core.catalogs import REST_TIMEOUT_S, RestCatalogConfig
from airflow_kafka_offsets.core.connection_form import (
    ConnectionForm,
    extra_object,
    extra_seconds,
    extra_text,
    text_field,
)
from airflow_kafka_offsets.errors import ConfigurationError

CONN_TYPE = "kafka_offsets_iceberg_rest"
HOOK_NAME = "Iceberg REST catalog (Kafka Offsets)"
HOOK_CLASS = "airflow_kafka_offsets.hooks.iceberg_rest.IcebergRestCatalogHook"
EXAMPLE_URI = "https://catalog.example.com/api/catalog"

TOKEN = "token"
WAREHOUSE = "warehouse"
PREFIX = "prefix"
SCOPE = "scope"
OAUTH2_SERVER_URI = "oauth2_server_uri"
HEADERS = "headers"
S3_ENDPOINT = "s3_endpoint"
S3_REGION = "s3_region"
PROPERTIES = "properties"
TIMEOUT = "timeout"

FIELDS: dict[str, dict[str, Any]] = {
    WAREHOUSE: text_field(
        "Warehouse",
        "What the catalog calls the warehouse: a catalog name (Polaris, Unity, Lakekeeper), an S3 Tables "
        "table bucket ARN, an account id (Glue), or a location. Empty: the catalog's default.",
    ),
    TOKEN: text_field(
        "Bearer token",
        "Instead of an OAuth2 client id and secret: a token sent as 'Authorization: Bearer ...' "
        "(e.g. a Databricks personal access token).",
        secret=True,
    ),
    SCOPE: text_field(
        "OAuth2 scope",
        "The scope the client-credentials grant asks for, e.g. PRINCIPAL_ROLE:ALL on Polaris. Empty: catalog.",
    ),
    OAUTH2_SERVER_URI: text_field(
        "OAuth2 token endpoint",
        "Where the client id and secret are exchanged for a token, when not the catalog's own "
        "<URI>/v1/oauth/tokens (e.g. an identity provider's token URL).",
    ),
    PREFIX: text_field(
        "Prefix",
        "A path prefix the catalog's /v1/config does not already give (rarely needed).",
    ),
    HEADERS: text_field(
        "Extra HTTP headers",
        'A JSON object of headers sent with every catalog request, e.g. {"X-Tenant": "analytics"}.',
    ),
    S3_ENDPOINT: text_field(
        "S3 endpoint",
        "The S3 API the table files are on, for S3-compatible storage (http(s)://host:port). Empty: "
        "Amazon S3, or what the catalog or the object storage connection says.",
    ),
    S3_REGION: text_field("S3 region", "The region of the table files' bucket, e.g. eu-west-1."),
    TIMEOUT: text_field(
        "Request timeout (seconds)",
        f"How long each request to the catalog may take before the step fails (a retry finds a commit whose "
        f"answer was lost in the table's history). Empty: {REST_TIMEOUT_S:g}.",
    ),
    PROPERTIES: text_field(
        "Further catalog properties",
        "A JSON object of PyIceberg RestCatalog properties, e.g. for AWS Glue or S3 Tables: "
        '{"rest.sigv4-enabled": "true", "rest.signing-name": "glue", "rest.signing-region": "eu-west-1"}.',
    ),
}
FORM = ConnectionForm(
    CONN_TYPE,
    HOOK_CLASS,
    HOOK_NAME,
    hidden_fields=("port", "schema", "extra"),
    relabeling={"host": "Catalog URI", "login": "OAuth2 client id", "password": "OAuth2 client secret"},
    placeholders={
        "host": f"{EXAMPLE_URI} (the base of /v1/config)",
        "login": "the client id of the OAuth2 client-credentials grant; empty with a bearer token or SigV4",
        "password": "the client's secret",
    },
    fields=FIELDS,
)


def connection_type_info() -> dict[str, Any]:
    """The ``connection-types`` entry of the provider info: the form Airflow's UI shows for the type."""
    return FORM.provider_entry()


def check_conn_type(conn_id: str, conn_type: str | None) -> None:
    if conn_type != CONN_TYPE:
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has type {conn_type!r}: give it type {CONN_TYPE!r} "
            f"({HOOK_NAME})"
        )


def _text(extra: Mapping[str, Any], key: str, conn_id: str) -> str | None:
    return extra_text(extra, key, f"Iceberg REST catalog connection {conn_id!r}")


def _object(extra: Mapping[str, Any], key: str, conn_id: str) -> dict[str, str]:
    """A JSON object of text values, given as an object or as its JSON text (what the form stores)."""
    value = extra_object(extra, key, f"Iceberg REST catalog connection {conn_id!r}")
    if not all(isinstance(v, str) for v in value.values()):
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has {key} that is not a JSON object of text values"
        )
    return value


def _uri(conn_id: str, host: str | None, key: str = "URI (host)") -> str:
    candidate = (host or "").strip().rstrip("/")
    if "@" in candidate:  # user:password@host (never quote it: it holds a secret)
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has credentials inside its {key}: give them as the "
            "OAuth2 client id and secret, or the bearer token"
        )
    parts = urlsplit(candidate)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has {key} {candidate!r}: give http(s)://host[:port][/path], "
            f"e.g. {EXAMPLE_URI}"
        )
    return candidate


def rest_catalog_config(
    conn_id: str, host: str | None, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> RestCatalogConfig:
    """Read a REST catalog connection's fields into PyIceberg ``RestCatalog`` properties; refuses what the
    client would misread, naming the field (never its secret)."""
    uri = _uri(conn_id, host)
    client_id, secret = login or None, password or None
    if bool(client_id) != bool(secret):
        missing = "client secret (password)" if client_id else "client id (login)"
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has no OAuth2 {missing}: give both or neither"
        )
    if client_id and ":" in client_id:
        raise ConfigurationError(f"Iceberg REST catalog connection {conn_id!r} has a client id (login) with ':'")
    token = _text(extra, TOKEN, conn_id)
    if token and client_id:
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has both an OAuth2 client (login, password) and a bearer "
            f"token ({TOKEN}): give one"
        )
    scope, oauth2_uri = _text(extra, SCOPE, conn_id), _text(extra, OAUTH2_SERVER_URI, conn_id)
    if (scope or oauth2_uri) and not client_id:
        raise ConfigurationError(
            f"Iceberg REST catalog connection {conn_id!r} has {SCOPE if scope else OAUTH2_SERVER_URI} but no OAuth2 "
            "client id and secret (login, password)"
        )
    properties: dict[str, str] = dict(_object(extra, PROPERTIES, conn_id))
    endpoint = _text(extra, S3_ENDPOINT, conn_id)
    optional = {
        "uri": uri,
        "credential": f"{client_id}:{secret}" if client_id else None,
        "token": token,
        "scope": scope,
        "oauth2-server-uri": _uri(conn_id, oauth2_uri, OAUTH2_SERVER_URI) if oauth2_uri else None,
        "warehouse": _text(extra, WAREHOUSE, conn_id),
        "prefix": _text(extra, PREFIX, conn_id),
        "s3.endpoint": _uri(conn_id, endpoint, S3_ENDPOINT) if endpoint else None,
        "s3.region": _text(extra, S3_REGION, conn_id),
    }
    properties |= {k: v for k, v in optional.items() if v}
    properties |= {f"header.{name}": value for name, value in _object(extra, HEADERS, conn_id).items()}
    return RestCatalogConfig(conn_id, uri, properties, _timeout(extra, conn_id))


def _timeout(extra: Mapping[str, Any], conn_id: str) -> float:
    return extra_seconds(extra, TIMEOUT, REST_TIMEOUT_S, f"Iceberg REST catalog connection {conn_id!r}")


def secrets(config: RestCatalogConfig) -> tuple[str, ...]:
    """The values to mask in logs: the client secret and the token."""
    credential = config.properties.get("credential", "")
    found = (credential.split(":", 1)[1] if ":" in credential else None, config.properties.get("token"))
    return tuple(s for s in found if s)
