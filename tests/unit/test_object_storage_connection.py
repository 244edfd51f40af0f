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
    assert set(entry["conn-fields"]) == {"endpoint_url", "region_name", "addressing_style", "aws_session_token"}
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
