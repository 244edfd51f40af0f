"""The local sink's attempt housekeeping on a real filesystem: withdraw, discard, listing."""

from __future__ import annotations

import json

from airflow_kafka_offsets.core.model import BatchPlan
from airflow_kafka_offsets.sinks import REPORT_NAME, LocalDirectorySink
from airflow_kafka_offsets.sinks.local import _local_path


def stage(sink: LocalDirectorySink, attempt: str) -> str:
    uri = sink.staging_uri("p", 7, attempt)
    path = _local_path(uri)
    path.mkdir(parents=True)
    (path / "part-0.parquet").write_text(attempt)
    (path / REPORT_NAME).write_text(json.dumps({"attempt_id": attempt}))
    return uri


def test_withdraw_moves_a_published_output_back_to_its_attempts_staging(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    output = sink.output_uri("p", 7)
    sink.publish_directory(stage(sink, "a1"), output)
    back = sink.withdraw(None, "uid", BatchPlan("p", 7, 0, (), output))
    assert back == sink.staging_uri("p", 7, "a1")
    assert not _local_path(output).exists()
    assert (_local_path(back) / "part-0.parquet").read_text() == "a1"
    # published again from there, as a commit after a failed abort would
    sink.publish_directory(back, output)
    assert sink.read_report(output) == {"attempt_id": "a1"}
    assert sink.withdraw(None, "uid", BatchPlan("p", 8, 0, (), sink.output_uri("p", 8))) is None


def test_discard_attempt_keeps_other_attempts_and_removes_the_empty_batch_dir(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    a1, a2 = stage(sink, "a1"), stage(sink, "a2")
    assert sink.staged_attempts("p") == {7: [a1, a2]}
    sink.discard_attempt(a1)
    assert sink.staged_attempts("p") == {7: [a2]}
    sink.discard_attempt(a2)
    assert sink.staged_attempts("p") == {}
    assert not (tmp_path / "_staging" / "p" / "batch=000000000007").exists()
    sink.discard_attempt(a2)  # already gone: nothing to do


def test_remove_output(tmp_path):
    sink = LocalDirectorySink(str(tmp_path))
    output = sink.output_uri("p", 7)
    sink.publish_directory(stage(sink, "a1"), output)
    assert sink.remove_output(output) is True
    assert not _local_path(output).exists()
    assert sink.remove_output(output) is False
