"""The local sink on a real filesystem: deterministic locations, atomic publish, no escapes."""

from __future__ import annotations

import json

import pytest

from airflow_kafka_offsets.errors import InvalidPipelineSpecError, OutputLocationError
from airflow_kafka_offsets.sinks import REPORT_NAME, LocalDirectorySink
from airflow_kafka_offsets.sinks.local import _local_path


def stage(sink: LocalDirectorySink, attempt: str, content: str) -> str:
    uri = sink.staging_uri("p", 7, attempt)
    path = _local_path(uri)
    path.mkdir(parents=True)
    (path / "part-0.parquet").write_text(content)
    (path / REPORT_NAME).write_text(json.dumps({"attempt": attempt}))
    return uri


def test_locations_are_a_function_of_pipeline_and_batch(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    assert sink.output_uri("p", 7) == f"file://{tmp_path}/p/batch=000000000007"
    assert sink.output_uri("p", 7) == LocalDirectorySink(tmp_path.as_uri()).output_uri("p", 7)
    assert sink.staging_uri("p", 7, "a1") == f"file://{tmp_path}/_staging/p/batch=000000000007/a1"


def test_publish_moves_and_replaces_whole(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    final = _local_path(sink.output_uri("p", 7))
    sink.publish_directory(stage(sink, "a1", "first"), sink.output_uri("p", 7))
    assert (final / "part-0.parquet").read_text() == "first"
    # a later attempt of the same (uncommitted) batch replaces the earlier output entirely
    uri2 = stage(sink, "a2", "second")
    (final / "stray.parquet").write_text("left by attempt 1")
    sink.publish_directory(uri2, sink.output_uri("p", 7))
    assert sorted(p.name for p in final.iterdir()) == [REPORT_NAME, "part-0.parquet"]
    assert (final / "part-0.parquet").read_text() == "second"
    assert not _local_path(uri2).exists()
    assert sink.read_report(sink.output_uri("p", 7)) == {"attempt": "a2"}


def test_incomplete_staging_is_not_published(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    uri = stage(sink, "a1", "x")
    (_local_path(uri) / REPORT_NAME).unlink()
    with pytest.raises(OutputLocationError, match="incomplete"):
        sink.publish_directory(uri, sink.output_uri("p", 7))
    assert not _local_path(sink.output_uri("p", 7)).exists()


def test_paths_cannot_escape_the_root(tmp_path):
    sink = LocalDirectorySink(str(tmp_path / "root"))
    with pytest.raises(InvalidPipelineSpecError):
        sink.output_uri("../evil", 1)
    with pytest.raises(OutputLocationError, match="escapes"):
        sink.publish_directory((tmp_path / "elsewhere").as_uri(), sink.output_uri("p", 1))


@pytest.mark.parametrize("root", ["relative/dir", "s3://bucket/x", "hdfs:///x"])
def test_unsupported_roots(root):
    with pytest.raises(OutputLocationError):
        LocalDirectorySink(root)


def test_unwritable_root_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputLocationError, match="not writable"):
        LocalDirectorySink(str(blocker / "sub")).check_writable()
