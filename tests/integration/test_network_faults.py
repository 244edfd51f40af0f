"""Network faults through the stack's toxiproxy (``scripts/faults --network``): every worker reaches the
ledger, Kafka and the Spark Connect server through the proxy, whose links the harness black-holes, cuts,
resets or slows at a chosen moment of a try and heals after it; each try must end within its bound
(a hang fails the trial), and the batch must be committed once with lost 0, duplicated 0.

CI runs one batch whose read has its Kafka link cut mid-job and whose commit has its ledger link
black-holed with the transaction open (the server ends the idle transaction, the try fails, its retry
commits once): two faults, four tries. Each kind on its own in both task forms runs with the long tests.
"""

from __future__ import annotations

import json
import os

import pytest

from faults_harness.__main__ import CONNECT_KINDS, run
from faults_harness.network_kinds import NETWORK_KINDS

# Serial: it cuts links through the stack's fault proxy and bounds how long a silent ledger costs.
pytestmark = [pytest.mark.integration, pytest.mark.serial]
NEEDS_OPTIONS: dict[str, dict] = {"s3_blackhole": {"storage": "s3"}, "registry_cut": {"avro": True}}
"""The options a kind needs besides --network (faults_harness.service_links.NEEDS)."""


def run_network(kind: str, workdir, connect: dict | None, **options):
    seed = int(os.environ["FAULTS_SEED"]) if os.environ.get("FAULTS_SEED") else None
    results, summary, ok = run(
        trials=1,
        kinds=[kind],
        seed=seed,
        batches=1,
        workdir=workdir,
        keep=True,
        spark_connect=connect,
        network=True,
        records=(20, 40),
        **options,
    )
    (result,) = results
    assert result.fired, f"a fault was not injected: {result.fault}"
    assert ok, "\n".join(summary) + "\n" + (result.error or "")
    return summary, result


def test_a_kafka_cut_in_the_read_and_a_silent_ledger_in_the_commit_commit_the_batch_once(
    stack, spark_connect, tmp_path
):
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    summary, result = run_network("kafka_cut+ledger_blackhole", tmp_path / "faults", connect)
    assert summary == [
        f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"
        for kind in ("kafka_cut", "ledger_blackhole")
    ]
    assert "LedgerConnectionLostError" in result.fault  # the silent ledger's try failed, naming the ledger
    tries = [(s.step, s.try_number, s.ok) for s in result.steps]
    assert tries == [("plan", 1, True), ("read", 1, True), ("commit", 1, False), ("commit", 2, True)]


@pytest.mark.long
@pytest.mark.parametrize("form", ["three-task", "one-task"])
@pytest.mark.parametrize("kind", list(NETWORK_KINDS))
def test_each_network_fault_kind_commits_the_batch_once(stack, spark_connect, tmp_path, kind, form):
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    summary, _ = run_network(kind, tmp_path / "faults", connect, form=form, **NEEDS_OPTIONS.get(kind, {}))
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"]


@pytest.mark.long
@pytest.mark.parametrize("kind", [kind for kind in NETWORK_KINDS if kind not in CONNECT_KINDS])
def test_each_network_fault_kind_through_spark_submit_commits_the_batch_once(stack, tmp_path, kind):
    """The reads through spark-submit: its driver and executors reach Kafka, S3 and the registry through the
    proxy by the worker's connections (connect_reset has no link to cut there)."""
    summary, _ = run_network(kind, tmp_path / "faults", None, **NEEDS_OPTIONS.get(kind, {}))
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"]
