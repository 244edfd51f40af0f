"""The provider's Iceberg REST catalog connection type: its form as Airflow validates it, the PyIceberg
RestCatalog properties it gives, what it refuses, its secrets kept out of messages, reprs and logs, and
how a sink's ``catalog_conn_id`` picks a REST catalog or a SQL one by the connection's type."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets.clients.iceberg_rest import CONN_TYPE, FIELDS, connection_type_info, rest_catalog_config
from airflow_kafka_offsets.core.catalogs import REST_TIMEOUT_S, RestCatalogConfig
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.iceberg_rest import IcebergRestCatalogHook
from airflow_kafka_offsets.runtime import iceberg_catalog

SECRET = "rest-Client-5ecret:with/chars"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.rest-bearer-token"
URI = "https://catalog.example.com/api/catalog"


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def test_the_connection_type_validates_against_airflows_provider_schema() -> None:
    schema = json.loads(files("airflow").joinpath("provider.yaml.schema.json").read_text())
    info = airflow_kafka_offsets.get_provider_info()
    jsonschema.validate(info["connection-types"], schema["properties"]["connection-types"])
    (entry,) = [e for e in info["connection-types"] if e["connection-type"] == CONN_TYPE]
    assert entry == connection_type_info()
    assert entry["hook-class-name"] == f"{IcebergRestCatalogHook.__module__}.{IcebergRestCatalogHook.__qualname__}"
    assert IcebergRestCatalogHook.__module__ in info["hooks"][0]["python-modules"]
    assert set(entry["conn-fields"]) == {
        "warehouse",
        "token",
        "scope",
        "oauth2_server_uri",
        "prefix",
        "headers",
        "s3_endpoint",
        "s3_region",
        "timeout",
        "properties",
    }
    assert all(field["description"] for field in FIELDS.values())
    assert FIELDS["token"]["schema"]["format"] == "password"  # masked in the form


def test_the_local_stack_exports_a_connection_of_this_type() -> None:
    from devstack.info import ICEBERG_REST_CONN_ID, ICEBERG_REST_CONN_TYPE

    assert (ICEBERG_REST_CONN_ID, ICEBERG_REST_CONN_TYPE) == (IcebergRestCatalogHook.default_conn_name, CONN_TYPE)


def test_every_field_becomes_its_pyiceberg_property() -> None:
    extra = {
        "warehouse": "analytics",
        "scope": "PRINCIPAL_ROLE:ALL",
        "oauth2_server_uri": "https://idp.example.com/oauth/token",
        "prefix": "p1",
        "headers": '{"X-Tenant": "a"}',
        "s3_endpoint": "http://minio:9000",
        "s3_region": "eu-west-1",
        "properties": {"rest.sigv4-enabled": "false"},
        "timeout": "2.5",
    }
    config = rest_catalog_config("cat", URI + "/", "client", SECRET, extra)
    assert config == RestCatalogConfig("cat", URI, config.properties, timeout_s=2.5)
    assert dict(config.properties) == {
        "uri": URI,
        "credential": f"client:{SECRET}",
        "scope": "PRINCIPAL_ROLE:ALL",
        "oauth2-server-uri": "https://idp.example.com/oauth/token",
        "warehouse": "analytics",
        "prefix": "p1",
        "header.X-Tenant": "a",
        "s3.endpoint": "http://minio:9000",
        "s3.region": "eu-west-1",
        "rest.sigv4-enabled": "false",
    }
    bearer = rest_catalog_config("cat", URI, None, None, {"token": TOKEN})
    assert dict(bearer.properties) == {"uri": URI, "token": TOKEN}
    assert bearer.timeout_s == REST_TIMEOUT_S == 60.0  # PyIceberg's own is none: a silent catalog hangs


@pytest.mark.parametrize(
    ("host", "login", "password", "extra", "message"),
    [
        (None, None, None, {}, "has URI (host) '': give http(s)://host[:port][/path]"),
        ("catalog:8181", None, None, {}, "has URI (host) 'catalog:8181': give http(s)://host[:port][/path]"),
        (f"https://u:{SECRET}@catalog", None, None, {}, "has credentials inside its URI (host)"),
        (URI, "client", None, {}, "has no OAuth2 client secret (password): give both or neither"),
        (URI, None, SECRET, {}, "has no OAuth2 client id (login): give both or neither"),
        (URI, "client", SECRET, {"token": TOKEN}, "has both an OAuth2 client (login, password) and a bearer token"),
        (URI, None, None, {"scope": "all"}, "has scope but no OAuth2 client id and secret"),
        (URI, None, None, {"headers": "{not json"}, "has headers that is not JSON: give an object"),
        (URI, None, None, {"properties": {"a": 1}}, "has properties that is not a JSON object of text values"),
        (URI, None, None, {"token": 12345}, "has a token that is not text"),
        (URI, None, None, {"timeout": "soon"}, "has timeout 'soon': give a number of seconds above 0"),
        (URI, None, None, {"timeout": 0}, "has timeout 0: give a number of seconds above 0"),
        (URI, None, None, {"timeout": "inf"}, "has timeout 'inf': give a number of seconds above 0"),
    ],
)
def test_bad_connections_are_refused_naming_the_connection_and_field_without_secrets(
    monkeypatch: pytest.MonkeyPatch,
    host: str | None,
    login: str | None,
    password: str | None,
    extra: dict,
    message: str,
) -> None:
    conn = {"conn_type": CONN_TYPE, "host": host, "login": login, "password": password, "extra": extra}
    set_connection(monkeypatch, "cat", conn)
    with pytest.raises(ConfigurationError) as info:
        IcebergRestCatalogHook("cat").config()
    assert str(info.value).startswith("Iceberg REST catalog connection 'cat' ")
    assert message in str(info.value)
    assert SECRET not in str(info.value) and TOKEN not in str(info.value)


def test_secrets_stay_out_of_reprs_and_are_masked_in_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.log import redact

    set_connection(monkeypatch, "client", {"conn_type": CONN_TYPE, "host": URI, "login": "c", "password": SECRET})
    set_connection(monkeypatch, "bearer", {"conn_type": CONN_TYPE, "host": URI, "extra": {"token": TOKEN}})
    for conn_id, secret in (("client", SECRET), ("bearer", TOKEN)):
        hook = IcebergRestCatalogHook(conn_id)
        config = hook.config()
        for text in (repr(config), str(config), repr(hook), str(hook)):
            assert secret not in text
        assert redact(f"value={secret}") == "value=***"


def test_a_catalog_conn_id_is_a_rest_catalog_or_a_sql_catalogs_database_by_its_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_connection(monkeypatch, "rest", {"conn_type": CONN_TYPE, "host": URI, "extra": {"token": TOKEN}})
    set_connection(monkeypatch, "sql", {"conn_type": "postgres", "host": "db", "login": "u", "password": "p"})
    rest = iceberg_catalog("rest")
    assert isinstance(rest, RestCatalogConfig) and rest.uri == URI
    sql = iceberg_catalog("sql")
    assert isinstance(sql, str) and sql.startswith("postgresql")
    set_connection(monkeypatch, "other", {"conn_type": "kafka_offsets_schema_registry", "host": URI})
    with pytest.raises(ConfigurationError, match="'other'"):
        IcebergRestCatalogHook("other").config()
