"""Network faults on every sink family (``scripts/faults --network --sink ...``): one batch whose Spark read has
its Kafka link cut mid-job through the stack's toxiproxy, and whose ledger COMMIT then reaches PostgreSQL
with its answer lost (a wire-protocol proxy resets the link as the answer comes back). Each try ends within
its bound, the commit's try fails saying the outcome is unknown, and its retry finds the batch committed:
every id once in the output, read back by the sink's own readers (pyarrow, PyIceberg, delta-rs).

Not serial: only the harness's own workers reach the services through the proxy, and each file's tests run
on one pytest worker, so no other test's links are cut.
"""

from __future__ import annotations

import json
import os

import pytest

from .test_network_faults import run_network

pytestmark = pytest.mark.integration
READ_CUT_AND_LOST_ANSWER = "kafka_cut+lost_commit_ack"
SINKS = {
    "directory-s3": ({"sink": "directory", "storage": "s3"}, "kafka_cut+s3_lost_answer+lost_commit_ack"),
    "iceberg": ({"sink": "iceberg"}, READ_CUT_AND_LOST_ANSWER),
    "iceberg-rest": ({"sink": "iceberg-rest", "storage": "s3"}, READ_CUT_AND_LOST_ANSWER),
    "delta": ({"sink": "delta"}, READ_CUT_AND_LOST_ANSWER),
    "delta-s3": ({"sink": "delta", "storage": "s3"}, "kafka_cut+s3_lost_answer"),
}
"""The sink families, each with its own table commit: a manifest on S3, an Iceberg pointer in the ledger's
transaction, an Iceberg REST catalog's commit before it, a Delta log entry carrying the batch's txn id; where
the table's commit is a PUT to S3, its answer lost too (``s3_lost_answer``: the directory's try fails and its
retry finds the manifest; Delta's client asks again, meets its own log entry and the try goes on)."""


@pytest.mark.parametrize("family", list(SINKS))
def test_a_kafka_cut_in_the_read_and_lost_commit_answers_commit_the_batch_once(
    stack, spark_connect, tmp_path, family: str
) -> None:
    options, chain = SINKS[family]
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    summary, result = run_network(chain, tmp_path / "faults", connect, **options)
    assert summary == [
        f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)" for kind in chain.split("+")
    ]
    tries = [(s.step, s.try_number, s.ok) for s in result.steps]
    commits = [ok for step, _, ok in tries if step == "commit"]
    assert tries[0] == ("plan", 1, True) and commits[-1] and not any(commits[:-1]), tries
    if "lost_commit_ack" in chain:
        assert "while committing: the COMMIT may or may not have reached the database" in result.fault
    if family == "directory-s3":  # its lost manifest answer failed a try, the next found the manifest
        assert commits == [False, False, True], tries
    if family == "delta-s3":  # the client asked again and met its own log entry: the try went on
        assert commits == [True] and "the try finished: its client asked again" in result.fault, result.fault
