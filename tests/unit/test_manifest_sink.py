"""The directory sink on S3 without I/O: its layout, its manifest document, and what it refuses."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from airflow_kafka_offsets.errors import ConfigurationError, ObjectStoreUnavailableError, OutputLocationError
from airflow_kafka_offsets.object_storage.access import S3Access, signing_credentials
from airflow_kafka_offsets.object_storage.refusals import s3_refusal
from airflow_kafka_offsets.object_storage.unavailable import unanswered
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


SECRET = "s3cr3t/Key+9"
MANIFEST = "s3://lake/root/orders/batch=000000000007/_manifest"
SLOW_DOWN = b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"


@contextmanager
def s3_that(answer: str) -> Iterator[str]:
    """A server on loopback that takes each connection and keeps silent, closes it unanswered, or answers
    503 SlowDown; yields its endpoint."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            conn.recv(65536)  # the request (headers and the small body)
            if answer == "close":
                conn.close()
            elif answer == "503":
                head = f"HTTP/1.1 503 Slow Down\r\nContent-Length: {len(SLOW_DOWN)}\r\nConnection: close\r\n\r\n"
                conn.sendall(head.encode() + SLOW_DOWN)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept
        server.close()
        for conn in held:
            conn.close()
        thread.join(5)


def sink_at(endpoint: str) -> ManifestDirectorySink:
    access = S3Access("AKID", SECRET, endpoint_url=endpoint, region="us-east-1", path_style=True, request_timeout_s=0.3)
    return ManifestDirectorySink("s3://lake/root", access)


def test_an_unanswered_manifest_put_names_s3_the_request_the_bound_the_state_and_the_next_step() -> None:
    message = unanswered("http://AKID:pw@127.0.0.1:9000", "PUT", MANIFEST, 2, TimeoutError("timed out"))
    assert message == (
        f"S3 at http://127.0.0.1:9000 did not answer PUT {MANIFEST} within 2 s (the object storage connection's "
        "extra key timeout, default 10 s). Whether S3 applied the PUT is unknown; nothing of this step is committed "
        "in the ledger (a batch being committed stays planned), and the next run reads the manifest to find whether "
        "the batch was published, never twice. Next: check that this worker reaches S3 at http://127.0.0.1:9000, or "
        "raise timeout for a slow link, then retry the task"
    )


def test_a_silent_s3_fails_the_request_within_the_connections_timeout() -> None:
    with s3_that("keep silent") as endpoint:
        started = time.monotonic()
        with pytest.raises(ObjectStoreUnavailableError) as raised:
            sink_at(endpoint).read_manifest("s3://lake/root/orders/batch=000000000007")
        took = time.monotonic() - started
    assert isinstance(raised.value, OSError) and isinstance(raised.value.__cause__, TimeoutError)
    assert 0.3 <= took < 2
    assert str(raised.value) == (
        f"S3 at {endpoint} did not answer GET {MANIFEST} within 0.3 s (the object storage connection's extra key "
        "timeout, default 10 s). Nothing was changed by this request; nothing of this step is committed in the "
        "ledger (a batch being committed stays planned). Next: check that this worker reaches S3 at "
        f"{endpoint}, or raise timeout for a slow link, then retry the task"
    )


def test_a_connection_closed_unanswered_or_a_server_error_is_s3_unavailable_too() -> None:
    with s3_that("close") as endpoint:
        with pytest.raises(ObjectStoreUnavailableError) as closed:
            sink_at(endpoint).check_writable()
    message = str(closed.value)
    assert message.startswith(f"S3 at {endpoint} did not answer PUT s3://lake/root/.write-probe-")
    assert message.endswith(
        "(RemoteDisconnected: Remote end closed connection without response; each wait ends after 0.3 s, the "
        "object storage connection's extra key timeout, default 10 s). Whether S3 applied the PUT is unknown; "
        "nothing of this step is committed in the ledger (a batch being committed stays planned). Next: check that "
        f"this worker reaches S3 at {endpoint}, or raise timeout for a slow link, then retry the task"
    )
    with s3_that("503") as endpoint:
        with pytest.raises(ObjectStoreUnavailableError) as failed:
            sink_at(endpoint).read_manifest("s3://lake/root/orders/batch=000000000007")
    assert str(failed.value) == (
        f"S3 answered 503 SlowDown to GET {MANIFEST}. Nothing was changed by this request; nothing of this step is "
        "committed in the ledger (a batch being committed stays planned). Next: retry the task"
    )
    assert all(SECRET not in str(e.value) for e in (closed, failed))
