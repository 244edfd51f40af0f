"""The directory sink on S3 without I/O: its layout, its manifest document, and what it refuses."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_offsets.errors import ConfigurationError, OutputLocationError
from airflow_kafka_offsets.object_storage.access import S3Access, signing_credentials
from airflow_kafka_offsets.object_storage.refusals import s3_refusal
from airflow_kafka_offsets.sinks import LocalDirectorySink, ManifestDirectorySink, directory_sink
from airflow_kafka_offsets.sinks.manifest import Manifest, ManifestFile

KEY = S3Access("AKID", "secret", endpoint_url="http://127.0.0.1:9000", region="us-east-1", path_style=True)


def test_an_s3_root_gets_the_manifest_sink_and_a_path_the_local_one(tmp_path) -> None:
    assert isinstance(directory_sink(str(tmp_path)), LocalDirectorySink)
    sink = directory_sink("s3a://lake/root/", KEY)
    assert isinstance(sink, ManifestDirectorySink)
    assert sink.describe() == {"format": "directory", "location": "s3://lake/root", "table": None}
    assert sink.output_uri("orders", 7) == "s3://lake/root/orders/batch=000000000007"
    assert sink.staging_uri("orders", 7, "a1") == "s3://lake/root/_staging/orders/batch=000000000007/a1"


def test_the_manifest_round_trips_and_a_foreign_document_is_refused() -> None:
    manifest = Manifest(
        "orders",
        "uid-1",
        7,
        2,
        "a1",
        "commit",
        (ManifestFile("s3://lake/root/_staging/orders/batch=000000000007/a1/part-0.parquet", 1234, 40),),
    )
    document = json.loads(manifest.to_json())
    assert document["records"] == 40 and document["format"] == 1
    assert Manifest.from_json(manifest.to_json(), "m") == manifest
    with pytest.raises(OutputLocationError, match=r"manifest s3://x/_manifest is not a batch manifest \(format 2"):
        Manifest.from_json(json.dumps({**document, "format": 2}).encode(), "s3://x/_manifest")
    with pytest.raises(OutputLocationError, match="is not a batch manifest"):
        Manifest.from_json(b"<html>", "s3://x/_manifest")


def test_refusals_name_the_bucket_and_what_to_check() -> None:
    denied = s3_refusal("s3a://lake/root/_staging/x", "AccessDenied")
    assert "bucket 'lake'" in denied and "AccessDenied" in denied and "object_storage_conn_id" in denied
    missing = s3_refusal("s3://gone/root", "NoSuchBucket")
    assert missing.startswith("S3 bucket 'gone' does not exist (at s3://gone/root)")


def test_signed_writes_need_a_key_and_default_to_the_aws_endpoint() -> None:
    with pytest.raises(ConfigurationError, match="needs an access key id and secret"):
        signing_credentials(S3Access(), "s3://lake/root")
    creds = signing_credentials(S3Access("AKID", "secret", region="eu-west-1"), "s3://lake/root")
    assert (creds.endpoint, creds.region) == ("https://s3.eu-west-1.amazonaws.com", "eu-west-1")
    assert "secret" not in repr(creds)
