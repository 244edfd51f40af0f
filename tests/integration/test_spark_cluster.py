"""The path users take when one machine is not enough: a Spark standalone cluster via spark://."""

from __future__ import annotations

from airflow_kafka_offsets.core.spec import build_spec

from .helpers import assert_exactly_once, committed_rows, produce
from .pipeline import run_once


def test_batch_on_a_standalone_cluster_through_the_spark_connection(stack, spark_cluster, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, 3000, partitions=3)
    spec = build_spec("on_cluster", [topic], str(tmp_path))
    outcome = run_once(ledger, spec, stack, conn_id="spark_cluster")
    assert outcome.records == 3000
    [_batch] = ledger.committed_batches("on_cluster")
    with ledger.transaction() as tx:
        master = tx.fetchone("SELECT report->>'master' FROM {s}.batches WHERE batch_id = 1")[0]
    assert master == spark_cluster
    assert_exactly_once(committed_rows(ledger, "on_cluster"), produced)
    # and the next batch on local[2] continues exactly where the cluster's batch ended
    more = produce(stack.bootstrap_servers, topic, 30, partitions=3)
    run_once(ledger, spec, stack)
    assert_exactly_once(committed_rows(ledger, "on_cluster"), produced + more)
    assert ledger.contiguity_problems("on_cluster") == []
