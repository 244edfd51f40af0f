"""The provider's S3 connection type: its form as Airflow validates it, and its fields read like ``aws``'s."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

import airflow_kafka_offsets
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook
from airflow_kafka_offsets.object_storage.access import S3Access, s3_access
from airflow_kafka_offsets.object_storage.connection import CONN_TYPE, FIELDS, connection_type_info

SECRET = "s3cr3t-Key/with+chars"
TOKEN = "FwoGZXIvYXdzEXAMPLETOKEN"
# What the form stores in the extra when every field is filled in.
FORM_EXTRA = {
    "endpoint_url": "http://127.0.0.1:9000",
    "region_name": "eu-central-1",
    "addressing_style": "path",
    "aws_session_token": TOKEN,
}
# The same settings as an Amazon-provider ``aws`` connection writes them.
AWS_EXTRA = {
    "endpoint_url": "http://127.0.0.1:9000",
    "region_name": "eu-central-1",
    "config_kwargs": {"s3": {"addressing_style": "path"}},
    "aws_session_token": TOKEN,
}


def test_the_connection_type_validates_against_airflows_provider_schema() -> None:
    """Airflow reads ``conn-fields`` and ``ui-field-behaviour`` from here to draw the form (3.2+)."""
    schema = json.loads(files("airflow").joinpath("provider.yaml.schema.json").read_text())
    info = airflow_kafka_offsets.get_provider_info()
    jsonschema.validate(info["connection-types"], schema["properties"]["connection-types"])
    (entry,) = [e for e in info["connection-types"] if e["connection-type"] == CONN_TYPE]
    assert entry == connection_type_info()
    assert entry["hook-class-name"] == f"{ObjectStorageHook.__module__}.{ObjectStorageHook.__qualname__}"
    assert ObjectStorageHook.conn_type == CONN_TYPE
    assert set(entry["conn-fields"]) == {
        "endpoint_url",
        "region_name",
        "addressing_style",
        "aws_session_token",
        "timeout",
        "s3a",
    }
    assert all(field["description"] for field in FIELDS.values())
    assert FIELDS["aws_session_token"]["schema"]["format"] == "password"  # masked in the form


def test_form_fields_read_exactly_like_the_aws_connection_with_the_same_settings() -> None:
    ours = s3_access("lake", "AKOKEY", SECRET, FORM_EXTRA)
    assert ours == s3_access("lake", "AKOKEY", SECRET, AWS_EXTRA)
    assert ours == S3Access("AKOKEY", SECRET, TOKEN, "http://127.0.0.1:9000", "eu-central-1", True)


@pytest.mark.parametrize(
    ("style", "endpoint", "path_style"),
    [
        ("auto", "http://s3:9000", True),
        ("auto", None, False),
        ("virtual", "http://s3:9000", False),
        ("path", None, True),
    ],
)
def test_addressing_style_from_the_form(style: str, endpoint: str | None, path_style: bool) -> None:
    extra = {"addressing_style": style, **({"endpoint_url": endpoint} if endpoint else {})}
    assert s3_access("lake", None, None, extra).path_style is path_style


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def test_the_form_stores_timeout_and_s3a_as_text_and_they_read_like_json_values() -> None:
    """The form keeps every field as text; an ``aws`` connection written by hand may give numbers and an object."""
    as_form = {"timeout": "2.5", "s3a": '{"fs.s3a.connection.timeout": "60000", "fs.s3a.retry.limit": 5}'}
    by_hand = {"timeout": 2.5, "s3a": {"fs.s3a.retry.limit": "5", "fs.s3a.connection.timeout": 60000}}
    ours = s3_access("lake", None, None, as_form)
    assert ours == s3_access("lake", None, None, by_hand)
    assert ours.request_timeout_s == 2.5
    assert ours.s3a == (("fs.s3a.connection.timeout", "60000"), ("fs.s3a.retry.limit", "5"))
    assert s3_access("lake", None, None, {"timeout": "", "s3a": ""}) == S3Access()  # empty fields: the defaults
    # without a key, S3A's credential chain may be chosen here (an instance or web identity role)
    role = {"s3a": {"fs.s3a.aws.credentials.provider": "x.WebIdentityTokenCredentialsProvider", "fs.s3a.x": True}}
    assert s3_access("lake", None, None, role).s3a == (
        ("fs.s3a.aws.credentials.provider", "x.WebIdentityTokenCredentialsProvider"),
        ("fs.s3a.x", "true"),
    )


def test_the_hook_reads_both_types_through_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(
        monkeypatch, "lake", {"conn_type": CONN_TYPE, "login": "AKOKEY", "password": SECRET, "extra": FORM_EXTRA}
    )
    set_connection(
        monkeypatch, "lake_aws", {"conn_type": "aws", "login": "AKOKEY", "password": SECRET, "extra": AWS_EXTRA}
    )
    assert ObjectStorageHook("lake").get_conn() == ObjectStorageHook("lake_aws").get_conn()
    assert ObjectStorageHook("lake").get_conn().session_token == TOKEN


@pytest.mark.parametrize(
    ("conn", "message"),
    [
        (
            {"conn_type": "postgres", "login": "AKOKEY", "password": SECRET},
            f"S3 connection 'lake' has type 'postgres': give it type '{CONN_TYPE}' (S3-compatible object storage "
            "(Kafka Offsets)) or 'aws' (the Amazon provider's)",
        ),
        (
            {"conn_type": CONN_TYPE, "login": "AKOKEY", "extra": {"aws_session_token": TOKEN}},
            "S3 connection 'lake' has no secret access key (password): give both or neither",
        ),
        (
            {"conn_type": CONN_TYPE, "password": SECRET},
            "S3 connection 'lake' has no access key id (login): give both or neither",
        ),
        (
            {"conn_type": CONN_TYPE, "extra": {"aws_session_token": TOKEN}},
            "S3 connection 'lake' has a session token (aws_session_token) but no access key id and secret",
        ),
        (
            {"conn_type": CONN_TYPE, "login": "K", "password": SECRET, "extra": {"endpoint_url": "minio:9000"}},
            "S3 connection 'lake' has endpoint_url 'minio:9000': give http(s)://host[:port]",
        ),
        (
            {"conn_type": CONN_TYPE, "login": "K", "password": SECRET, "extra": {"addressing_style": "dns"}},
            "S3 connection 'lake' has addressing_style 'dns': use 'path', 'virtual' or 'auto'",
        ),
        (
            {"conn_type": CONN_TYPE, "login": "K", "password": SECRET, "extra": {"timeout": "soon"}},
            "S3 connection 'lake' has timeout 'soon': give a number of seconds above 0",
        ),
        (
            {"conn_type": CONN_TYPE, "extra": {"s3a": '{"fs.s3a.connection.timeout": 60000'}},
            "S3 connection 'lake' has s3a that is not JSON: give an object",
        ),
        (
            {"conn_type": CONN_TYPE, "extra": {"s3a": {"spark.hadoop.fs.s3a.retry.limit": "5"}}},
            "S3 connection 'lake' has s3a key 'spark.hadoop.fs.s3a.retry.limit': give Hadoop S3A settings (fs.s3a.*)",
        ),
        (
            {"conn_type": CONN_TYPE, "login": "K", "password": SECRET, "extra": {"s3a": {"fs.s3a.secret.key": "x"}}},
            "S3 connection 'lake' has fs.s3a.secret.key in s3a: the connection sets it from the secret access key "
            "(password)",
        ),
        (
            {"conn_type": CONN_TYPE, "extra": {"s3a": {"fs.s3a.endpoint": "http://other:9000"}}},
            "S3 connection 'lake' has fs.s3a.endpoint in s3a: the connection sets it from endpoint_url",
        ),
        (
            {
                "conn_type": CONN_TYPE,
                "login": "K",
                "password": SECRET,
                "extra": {"s3a": {"fs.s3a.aws.credentials.provider": "x.WebIdentityTokenCredentialsProvider"}},
            },
            "S3 connection 'lake' has fs.s3a.aws.credentials.provider in s3a: the connection sets it from the "
            "access key id (login)",
        ),
        (
            {"conn_type": CONN_TYPE, "extra": {"s3a": {"fs.s3a.retry.interval": 0.5}}},
            "S3 connection 'lake' has s3a fs.s3a.retry.interval of type float: give text or a whole number",
        ),
    ],
)
def test_bad_connections_are_refused_naming_the_connection_and_field_without_secrets(
    monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any], message: str
) -> None:
    set_connection(monkeypatch, "lake", conn)
    with pytest.raises(ConfigurationError) as info:
        ObjectStorageHook("lake", purpose="for s3://lake/out").get_conn()
    assert str(info.value) == message
    assert SECRET not in str(info.value) and TOKEN not in str(info.value)


def test_a_missing_connection_names_it_and_the_location(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError) as info:
        ObjectStorageHook("nowhere", purpose="for s3://lake/out").get_conn()
    assert str(info.value) == "S3 (for s3://lake/out) connection 'nowhere' is not defined in Airflow"
