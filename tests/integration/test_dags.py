"""The example DAG through real Airflow DAG runs (dag.test) against the real stack."""

from __future__ import annotations

import os

import pytest

from airflow_kafka_offsets.core.model import TopicPartition as TP

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce, run_dag

DAG_ID = "kafka_ingest_example"


@pytest.fixture()
def example_dag_env(monkeypatch, stack, airflow_db, spark_connect, make_topic, tmp_path, schema):
    """The example DAG as it is, its read steps on the warm Spark Connect server (its spark_default
    connection is the server's): spark-submit under DAG runs is the subject of test_concurrency and
    test_scheduled_ingest."""
    topic = make_topic(partitions=3)
    pipeline = f"example_{schema}"
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC", topic)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE", pipeline)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", schema)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    return topic, pipeline


def test_example_dag_ingests_waves_exactly_once(example_dag_env, stack, ledger):
    topic, pipeline = example_dag_env
    produced = []
    waves = [4000, 3500, 2500]
    for wave, count in enumerate(waves):
        produced += produce(stack.bootstrap_servers, topic, count, partitions=3, tag=f"w{wave}-")
        run_dag(DAG_ID)
        # each run ingests only what arrived since the previous one
        batches = ledger.committed_batches(pipeline)
        assert len(batches) == wave + 1
        assert batches[-1].records_committed == count
    assert_exactly_once(committed_rows(ledger, pipeline), produced)
    last_offsets = {}
    for p in produced:
        last_offsets[TP(topic, p["partition"])] = max(last_offsets.get(TP(topic, p["partition"]), -1), p["offset"])
    assert ledger.cursors(pipeline) == {tp: offset + 1 for tp, offset in last_offsets.items()}
    ends = {}
    for _batch_id, state, _, partition, cursor, start, end, _records in ledger_ranges(ledger, pipeline):
        assert state == "committed"
        assert cursor == start == ends.get(partition, 0)  # contiguous from the first offset
        ends[partition] = end
    assert ledger.contiguity_problems(pipeline) == []


def test_example_dag_twice_in_a_row_second_run_reads_only_new_records(example_dag_env, stack, ledger):
    topic, pipeline = example_dag_env
    first = produce(stack.bootstrap_servers, topic, 90, partitions=3)
    run_dag(DAG_ID)
    run_dag(DAG_ID)  # nothing new: no batch planned, Spark skipped, still a successful run
    assert len(ledger.committed_batches(pipeline)) == 1
    second = produce(stack.bootstrap_servers, topic, 30, partitions=3)
    run_dag(DAG_ID)
    batches = ledger.committed_batches(pipeline)
    assert [b.records_committed for b in batches] == [90, 30]
    assert [(r.start, r.end) for r in batches[1].plan.ranges] == [(30, 40)] * 3
    assert_exactly_once(committed_rows(ledger, pipeline), first + second)


def test_the_example_dags_templated_cap_shapes_each_batch(example_dag_env, stack, ledger, monkeypatch):
    """``plan_kwargs`` options are rendered like the operators' own arguments: the DAG's templated cap
    (its variable) splits what Kafka holds into capped batches."""
    topic, pipeline = example_dag_env
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_MAX_RECORDS", "60")
    produced = produce(stack.bootstrap_servers, topic, 90, partitions=3)
    run_dag(DAG_ID)
    run_dag(DAG_ID)
    batches = ledger.committed_batches(pipeline)
    assert [b.records_committed for b in batches] == [60, 30]
    assert [[(r.start, r.end) for r in b.plan.ranges] for b in batches] == [[(0, 20)] * 3, [(20, 30)] * 3]
    assert_exactly_once(committed_rows(ledger, pipeline), produced)
