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
SINKS = {
    "directory-s3": {"sink": "directory", "storage": "s3"},
    "iceberg": {"sink": "iceberg"},
    "iceberg-rest": {"sink": "iceberg-rest", "storage": "s3"},
    "delta": {"sink": "delta"},
}
"""The sink families, each with its own table commit: a manifest on S3, an Iceberg pointer in the ledger's
transaction, an Iceberg REST catalog's commit before it, a Delta log entry carrying the batch's txn id."""


@pytest.mark.parametrize("family", list(SINKS))
def test_a_kafka_cut_in_the_read_and_a_lost_commit_answer_commit_the_batch_once(
    stack, spark_connect, tmp_path, family: str
) -> None:
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    summary, result = run_network("kafka_cut+lost_commit_ack", tmp_path / "faults", connect, **SINKS[family])
    assert summary == [
        f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"
        for kind in ("kafka_cut", "lost_commit_ack")
    ]
    assert "while committing: the COMMIT may or may not have reached the database" in result.fault
    tries = [(s.step, s.try_number, s.ok) for s in result.steps]
    assert tries[0] == ("plan", 1, True) and tries[-2:] == [("commit", 1, False), ("commit", 2, True)]
    assert all(step == "read" for step, _, _ in tries[1:-2]) and tries[-3][2], tries  # the read ended, then ok
