"""The fault-injection harness (scripts/faults) on the real stack: one trial of each fault kind.

Each trial produces records with unique ids, runs plan -> read -> commit as separate worker
processes, injects its fault (a SIGKILL at a crash point or in the middle of the Spark job, a
PostgreSQL or Kafka restart mid-batch), recovers like Airflow (task retry or next run) and
verifies exactly-once through the ledger. ``scripts/faults --trials N`` runs more of them;
concurrent and stale runs are in test_concurrency.py (and in the harness as
``concurrent_runs`` and ``stale_worker``).
"""

from __future__ import annotations

import os

import pytest

from faults_harness.__main__ import run

KINDS = [
    "after_plan",
    "during_spark_read",
    "during_parquet_write",
    "spark_orphaned",
    "after_spark",
    "after_publish",
    "in_commit_transaction",
    "after_commit",
    "postgres_restart",
    "kafka_restart",
]


@pytest.mark.parametrize("kind", KINDS)
def test_fault_kind_loses_and_duplicates_nothing(stack, tmp_path, kind):
    seed = int(os.environ["FAULTS_SEED"]) if os.environ.get("FAULTS_SEED") else None
    results, summary, ok = run(trials=1, kinds=[kind], seed=seed, batches=1, workdir=tmp_path / "faults",
                               keep=True)
    (result,) = results
    assert result.fired, f"the fault was not injected: {result.fault}"
    assert ok, "\n".join(summary)
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"]
