"""The provider's schema registry connection type: its form as Airflow validates it, the client config
it gives, what it refuses, and its secrets kept out of messages, reprs and logs."""

from __future__ import annotations

import json
import logging
from importlib.resources import files
from typing import Any

import certifi
import jsonschema
import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets.clients.schema_registry import (
    CONN_TYPE,
    FIELDS,
    RegistryAccess,
    connection_type_info,
    registry_access,
)
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.schema_registry import SchemaRegistryHook

PASSWORD = "registry-Pa55word:with/chars"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.registry-bearer-token"
URL = "https://registry.example.com:8081"
CA_FILE = certifi.where()  # any readable PEM bundle: the client loads it when it is made


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def test_the_connection_type_validates_against_airflows_provider_schema() -> None:
    schema = json.loads(files("airflow").joinpath("provider.yaml.schema.json").read_text())
    info = airflow_kafka_offsets.get_provider_info()
    jsonschema.validate(info["connection-types"], schema["properties"]["connection-types"])
    (entry,) = [e for e in info["connection-types"] if e["connection-type"] == CONN_TYPE]
    assert entry == connection_type_info()
    assert entry["hook-class-name"] == f"{SchemaRegistryHook.__module__}.{SchemaRegistryHook.__qualname__}"
    assert SchemaRegistryHook.__module__ in info["hooks"][0]["python-modules"]
    assert SchemaRegistryHook.conn_type == CONN_TYPE
    assert set(entry["conn-fields"]) == {
        "bearer_token",
        "bearer_logical_cluster",
        "bearer_identity_pool_id",
        "ssl_ca_location",
    }
    assert all(field["description"] for field in FIELDS.values())
    assert FIELDS["bearer_token"]["schema"]["format"] == "password"  # masked in the form


def test_the_local_stack_exports_a_connection_of_this_type() -> None:
    from devstack.info import SCHEMA_REGISTRY_CONN_ID, SCHEMA_REGISTRY_CONN_TYPE

    assert (SCHEMA_REGISTRY_CONN_ID, SCHEMA_REGISTRY_CONN_TYPE) == (SchemaRegistryHook.default_conn_name, CONN_TYPE)


@pytest.mark.parametrize(
    ("conn", "config"),
    [
        ({"host": "http://127.0.0.1:8081"}, {"url": "http://127.0.0.1:8081"}),
        (
            {"host": f" {URL}/apis/ccompat/v7/ ", "login": "ako", "password": PASSWORD},
            {"url": f"{URL}/apis/ccompat/v7", "basic.auth.user.info": f"ako:{PASSWORD}"},
        ),
        (
            {"host": "https://a:8081, https://b:8081", "extra": {"ssl_ca_location": CA_FILE}},
            {"url": "https://a:8081,https://b:8081", "ssl.ca.location": CA_FILE},
        ),
        (
            {"host": URL, "extra": {"bearer_token": TOKEN}},
            {
                "url": URL,
                "bearer.auth.credentials.source": "STATIC_TOKEN",
                "bearer.auth.token": TOKEN,
                "bearer.auth.logical.cluster": "",
            },
        ),
        (
            {
                "host": URL,
                "extra": {
                    "bearer_token": TOKEN,
                    "bearer_logical_cluster": "lsrc-1",
                    "bearer_identity_pool_id": "pool-2",
                },
            },
            {
                "url": URL,
                "bearer.auth.credentials.source": "STATIC_TOKEN",
                "bearer.auth.token": TOKEN,
                "bearer.auth.logical.cluster": "lsrc-1",
                "bearer.auth.identity.pool.id": "pool-2",
            },
        ),
    ],
)
def test_the_hook_gives_confluent_kafkas_client_config(
    monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any], config: dict[str, str]
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    set_connection(monkeypatch, "registry", {"conn_type": CONN_TYPE, **conn})
    hook = SchemaRegistryHook("registry")
    assert hook.client_config() == config
    assert isinstance(hook.get_conn(), SchemaRegistryClient)  # the client accepts it (no request is made)


def test_the_default_connection_id_is_the_stacks(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "schema_registry_default", {"conn_type": CONN_TYPE, "host": URL})
    assert SchemaRegistryHook().access() == RegistryAccess((URL,))


@pytest.mark.parametrize(
    ("conn", "message"),
    [
        (
            {"conn_type": "http", "host": URL, "login": "ako", "password": PASSWORD},
            f"Schema registry connection 'registry' has type 'http': give it type '{CONN_TYPE}' "
            "(Schema registry (Kafka Offsets))",
        ),
        (
            {"conn_type": CONN_TYPE, "login": "ako", "password": PASSWORD},
            "Schema registry connection 'registry' names no registry URL (host): give e.g. "
            "https://registry.example.com:8081",
        ),
        (
            {"conn_type": CONN_TYPE, "host": f"https://ako:{PASSWORD}@registry.example.com"},
            "Schema registry connection 'registry' has credentials inside its URL (host): give the user and "
            "password as the connection's login and password",
        ),
        (
            {"conn_type": CONN_TYPE, "host": "registry.example.com:8081", "login": "ako", "password": PASSWORD},
            "Schema registry connection 'registry' has URL 'registry.example.com:8081': give "
            "http(s)://host[:port][/path], e.g. https://registry.example.com:8081",
        ),
        (
            {"conn_type": CONN_TYPE, "host": "https://registry.example.com:80a"},
            "Schema registry connection 'registry' has URL 'https://registry.example.com:80a': give "
            "http(s)://host[:port][/path], e.g. https://registry.example.com:8081",
        ),
        (
            {"conn_type": CONN_TYPE, "host": f"{URL}?x=1"},
            f"Schema registry connection 'registry' has URL '{URL}?x=1' with a query or fragment: give "
            "http(s)://host[:port][/path]",
        ),
        (
            {"conn_type": CONN_TYPE, "host": "https://registry.example.com", "port": 8081},
            "Schema registry connection 'registry' has a port field beside its URL: put the whole URL, port and "
            "path included, in host (e.g. https://registry.example.com:8081)",
        ),
        (
            {"conn_type": CONN_TYPE, "host": URL, "login": "ako"},
            "Schema registry connection 'registry' has no basic auth password: give both or neither",
        ),
        (
            {"conn_type": CONN_TYPE, "host": URL, "password": PASSWORD},
            "Schema registry connection 'registry' has no basic auth user (login): give both or neither",
        ),
        (
            {"conn_type": CONN_TYPE, "host": URL, "login": "a:b", "password": PASSWORD},
            "Schema registry connection 'registry' has a user (login) with ':' in it",
        ),
        (
            {
                "conn_type": CONN_TYPE,
                "host": URL,
                "login": "ako",
                "password": PASSWORD,
                "extra": {"bearer_token": TOKEN},
            },
            "Schema registry connection 'registry' has both basic auth (login, password) and a bearer token "
            "(bearer_token): give one",
        ),
        (
            {"conn_type": CONN_TYPE, "host": URL, "extra": {"bearer_logical_cluster": "lsrc-1"}},
            "Schema registry connection 'registry' has bearer_logical_cluster but no bearer token (bearer_token)",
        ),
        (
            {"conn_type": CONN_TYPE, "host": URL, "extra": {"bearer_token": 12345}},
            "Schema registry connection 'registry' has a bearer_token that is not text",
        ),
    ],
)
def test_bad_connections_are_refused_naming_the_connection_and_field_without_secrets(
    monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any], message: str
) -> None:
    set_connection(monkeypatch, "registry", conn)
    with pytest.raises(ConfigurationError) as info:
        SchemaRegistryHook("registry").client_config()
    assert str(info.value) == message
    assert PASSWORD not in str(info.value) and TOKEN not in str(info.value)


def test_an_unreadable_ca_file_is_refused_naming_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch, "registry", {"conn_type": CONN_TYPE, "host": URL, "extra": {"ssl_ca_location": "/nowhere/ca.pem"}}
    )
    with pytest.raises(ConfigurationError, match=r"^Schema registry connection 'registry' cannot be used: "):
        SchemaRegistryHook("registry").get_conn()


def test_a_missing_connection_names_it_and_the_purpose() -> None:
    with pytest.raises(ConfigurationError) as info:
        SchemaRegistryHook("nowhere", purpose="for topic orders").access()
    assert str(info.value) == "Schema registry (for topic orders) connection 'nowhere' is not defined in Airflow"


def test_secrets_stay_out_of_reprs_and_are_masked_in_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.sdk.log import redact

    set_connection(monkeypatch, "basic", {"conn_type": CONN_TYPE, "host": URL, "login": "ako", "password": PASSWORD})
    set_connection(monkeypatch, "bearer", {"conn_type": CONN_TYPE, "host": URL, "extra": {"bearer_token": TOKEN}})
    caplog.set_level(logging.DEBUG)
    for conn_id, secret in (("basic", PASSWORD), ("bearer", TOKEN)):
        hook = SchemaRegistryHook(conn_id)
        access = hook.access()
        assert secret in access.client_config().values() or f"ako:{secret}" in access.client_config().values()
        for text in (repr(access), str(access), repr(hook), str(hook)):
            assert secret not in text
        assert access.secrets() == (secret,)
        # registered with Airflow's masker: a log line quoting the value shows *** instead
        assert redact(f"value={secret}") == "value=***"
        hook.get_conn()
    assert PASSWORD not in caplog.text and TOKEN not in caplog.text


def test_a_client_without_the_extras_is_refused_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    set_connection(monkeypatch, "registry", {"conn_type": CONN_TYPE, "host": URL})
    real_import = builtins.__import__

    def no_registry_client(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "confluent_kafka.schema_registry":
            raise ImportError("No module named 'authlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_registry_client)
    with pytest.raises(ConfigurationError) as info:
        SchemaRegistryHook("registry").get_conn()
    assert str(info.value) == (
        "the schema registry client needs confluent-kafka's schema registry extras (No module named 'authlib'): "
        "pip install 'airflow-kafka-offsets[schema-registry]'"
    )


def test_registry_access_is_read_without_airflow() -> None:
    access = registry_access("r", URL, "ako", PASSWORD, {})
    assert access == RegistryAccess((URL,), "ako", PASSWORD)
    assert "ako" in repr(access) and URL in repr(access)


def test_the_stacks_registry_gets_its_password_digest_only_from_a_private_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import os
    import stat

    from devstack import schema_registry

    monkeypatch.setattr(schema_registry, "java_binary", lambda: "/opt/jdk-21/bin/java")
    cfg = schema_registry.configure(tmp_path, tmp_path / "quarkus-app", 18081, 19000)
    password = schema_registry.password(cfg)
    settings = (tmp_path / "schema-registry" / "config" / "application.properties").read_text()
    digest = hashlib.sha512(f"ako:Quarkus:{password}".encode()).hexdigest()  # Quarkus's digest-sha-512 form
    assert f"quarkus.security.users.embedded.users.ako={digest}\n" in settings
    assert password not in settings and password not in " ".join(schema_registry._argv(cfg))
    for path in (cfg["config"], cfg["password_file"]):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "quarkus.http.host=127.0.0.1\n" in settings and "quarkus.management.host=127.0.0.1\n" in settings
    assert schema_registry.url(cfg) == "http://127.0.0.1:18081/apis/ccompat/v7"
