"""A schema registry from an Airflow connection: the provider's connection type (its form, declared in
the provider info so Airflow's UI draws it without importing the hook) and the config of
confluent-kafka's ``SchemaRegistryClient`` it gives.

Any server of the Confluent Schema Registry REST API: Confluent's registry and Confluent Cloud,
Apicurio Registry (its compatible API under ``/apis/ccompat/v7``), Karapace, Redpanda's. The
connection holds the registry's URL in ``host`` (several, comma-separated, for a cluster), HTTP
basic auth in ``login`` and ``password``, or else a bearer token in the extra (``bearer_token``; with
``bearer_logical_cluster`` and ``bearer_identity_pool_id`` for Confluent Cloud), and optionally
``ssl_ca_location``, the CA bundle that verifies an https registry. The password and the token stay
in the returned :class:`RegistryAccess` and the client config: never in a message or a repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_offsets.core.connection_form import ConnectionForm, extra_text, text_field
from airflow_kafka_offsets.errors import ConfigurationError

CONN_TYPE = "kafka_offsets_schema_registry"
HOOK_NAME = "Schema registry (Kafka Offsets)"
HOOK_CLASS = "airflow_kafka_offsets.hooks.schema_registry.SchemaRegistryHook"

BEARER_TOKEN = "bearer_token"
LOGICAL_CLUSTER = "bearer_logical_cluster"
IDENTITY_POOL = "bearer_identity_pool_id"
SSL_CA_LOCATION = "ssl_ca_location"
EXAMPLE_URL = "https://registry.example.com:8081"

FIELDS: dict[str, dict[str, Any]] = {
    BEARER_TOKEN: text_field(
        "Bearer token",
        "Instead of a user and password: a token sent as 'Authorization: Bearer ...' (an OAuth "
        "access token, e.g. for Confluent Cloud or an Apicurio Registry behind OIDC).",
        secret=True,
    ),
    LOGICAL_CLUSTER: text_field(
        "Logical cluster (bearer)",
        "With a bearer token on Confluent Cloud: the registry's logical cluster id (lsrc-...). "
        "Leave empty for other registries.",
    ),
    IDENTITY_POOL: text_field(
        "Identity pool id (bearer)",
        "With a bearer token on Confluent Cloud, if its identity pool asks for it (pool-...). Leave empty otherwise.",
    ),
    SSL_CA_LOCATION: text_field(
        "CA certificate file",
        "For an https registry whose certificate is not signed by a public CA: the path, on the "
        "workers, of a PEM file of the CA(s) that sign it. Empty: the system's and certifi's CAs.",
    ),
}
FORM = ConnectionForm(
    CONN_TYPE,
    HOOK_CLASS,
    HOOK_NAME,
    hidden_fields=("port", "schema", "extra"),
    relabeling={"host": "Registry URL", "login": "User (basic auth)", "password": "Password (basic auth)"},
    placeholders={
        "host": f"{EXAMPLE_URL} (several: comma-separated); Apicurio: http(s)://host:port/apis/ccompat/v7",
        "login": "e.g. the API key on Confluent Cloud; empty: no basic auth",
        "password": "e.g. the API secret on Confluent Cloud",
    },
    fields=FIELDS,
)


def connection_type_info() -> dict[str, Any]:
    """The ``connection-types`` entry of the provider info: the form Airflow's UI shows for the type."""
    return FORM.provider_entry()


@dataclass(frozen=True)
class RegistryAccess:
    """Where the registry is and who to be (the password and the token are kept out of the repr)."""

    urls: tuple[str, ...]
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)
    logical_cluster: str | None = None
    identity_pool_id: str | None = None
    ssl_ca_location: str | None = None

    @property
    def url(self) -> str:
        return ",".join(self.urls)

    def secrets(self) -> tuple[str, ...]:
        """The values to mask in logs."""
        return tuple(s for s in (self.password, self.bearer_token) if s)

    def client_config(self) -> dict[str, str]:
        """confluent-kafka's ``SchemaRegistryClient`` config (holds the secrets: never log it)."""
        config = {"url": self.url}
        if self.user is not None:
            config["basic.auth.user.info"] = f"{self.user}:{self.password}"
        if self.bearer_token:
            config["bearer.auth.credentials.source"] = "STATIC_TOKEN"
            config["bearer.auth.token"] = self.bearer_token
            # the client requires it; it is sent as the target-sr-cluster header, which only Confluent Cloud reads
            config["bearer.auth.logical.cluster"] = self.logical_cluster or ""
            if self.identity_pool_id:
                config["bearer.auth.identity.pool.id"] = self.identity_pool_id
        if self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        return config


def check_conn_type(conn_id: str, conn_type: str | None) -> None:
    if conn_type != CONN_TYPE:
        raise ConfigurationError(
            f"Schema registry connection {conn_id!r} has type {conn_type!r}: give it type {CONN_TYPE!r} ({HOOK_NAME})"
        )


def _text(extra: Mapping[str, Any], key: str, conn_id: str) -> str | None:
    return extra_text(extra, key, f"Schema registry connection {conn_id!r}")


def _urls(conn_id: str, host: str | None) -> tuple[str, ...]:
    if not host or not host.strip():
        raise ConfigurationError(
            f"Schema registry connection {conn_id!r} names no registry URL (host): give e.g. {EXAMPLE_URL}"
        )
    urls = []
    for raw in host.split(","):
        candidate = raw.strip().rstrip("/")
        parts = urlsplit(candidate)
        if "@" in candidate:  # user:password@host (never quote it: it holds a secret)
            raise ConfigurationError(
                f"Schema registry connection {conn_id!r} has credentials inside its URL (host): give the user and "
                "password as the connection's login and password"
            )
        try:
            parts.port  # noqa: B018 - parsing it checks it
        except ValueError:
            parts = parts._replace(scheme="")  # refused below
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"Schema registry connection {conn_id!r} has URL {candidate!r}: give http(s)://host[:port][/path], "
                f"e.g. {EXAMPLE_URL}"
            )
        if parts.query or parts.fragment:
            raise ConfigurationError(
                f"Schema registry connection {conn_id!r} has URL {candidate!r} with a query or fragment: give "
                "http(s)://host[:port][/path]"
            )
        urls.append(candidate)
    return tuple(urls)


def registry_access(
    conn_id: str,
    host: str | None,
    login: str | None,
    password: str | None,
    extra: Mapping[str, Any],
    port: int | None = None,
    schema: str | None = None,
) -> RegistryAccess:
    """Read a registry connection's fields; refuses what the client would misread, naming the field
    (never its secret)."""
    urls = _urls(conn_id, host)
    if port or schema:
        field_name = "port" if port else "schema"
        raise ConfigurationError(
            f"Schema registry connection {conn_id!r} has a {field_name} field beside its URL: put the whole URL, "
            f"port and path included, in host (e.g. {EXAMPLE_URL})"
        )
    user, secret = login or None, password or None
    if bool(user) != bool(secret):
        missing = "password" if user else "user (login)"
        raise ConfigurationError(
            f"Schema registry connection {conn_id!r} has no basic auth {missing}: give both or neither"
        )
    if user and ":" in user:
        raise ConfigurationError(f"Schema registry connection {conn_id!r} has a user (login) with ':' in it")
    token = _text(extra, BEARER_TOKEN, conn_id)
    logical_cluster = _text(extra, LOGICAL_CLUSTER, conn_id)
    identity_pool = _text(extra, IDENTITY_POOL, conn_id)
    if token and user:
        raise ConfigurationError(
            f"Schema registry connection {conn_id!r} has both basic auth (login, password) and a bearer token "
            f"({BEARER_TOKEN}): give one"
        )
    if (logical_cluster or identity_pool) and not token:
        raise ConfigurationError(
            f"Schema registry connection {conn_id!r} has {LOGICAL_CLUSTER if logical_cluster else IDENTITY_POOL} "
            f"but no bearer token ({BEARER_TOKEN})"
        )
    return RegistryAccess(
        urls=urls,
        user=user,
        password=secret,
        bearer_token=token,
        logical_cluster=logical_cluster,
        identity_pool_id=identity_pool,
        ssl_ca_location=_text(extra, SSL_CA_LOCATION, conn_id),
    )
