"""Lag-driven scheduling: the pure decision (core/lag.py) and the trigger's serialized form."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_kafka_offsets.core.lag import (
    Fired,
    LagDecision,
    LagThresholds,
    decide,
    holding,
    read_positions,
    timestamps_needed,
    unread_positions,
)
from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.triggers import KafkaLagTrigger, lag_asset

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
P0, P1, P2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
OFFSETS = {P0: PartitionOffsets(0, 100), P1: PartitionOffsets(10, 50), P2: PartitionOffsets(0, 7)}
CURSORS = {P0: 60, P1: 50, P2: 7}  # lag 40 on P0 only


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# thresholds -----------------------------------------------------------------------------------


def test_thresholds_from_user_input():
    assert LagThresholds.of(100, None) == LagThresholds(100, None)
    assert LagThresholds.of("100", timedelta(minutes=10)) == LagThresholds(100, 600.0)
    assert LagThresholds.of(None, 2.5) == LagThresholds(None, 2.5)
    assert LagThresholds.of("", 30) == LagThresholds(None, 30.0)  # a blank rendered template is "not given"


@pytest.mark.parametrize(
    ("records", "age", "message"),
    [
        (None, None, "needs max_lag_records, max_lag_age or both"),
        (0, None, "max_lag_records must be a positive integer, got 0"),
        (-5, None, "max_lag_records must be a positive integer, got -5"),
        ("lots", None, "max_lag_records must be a positive integer, got 'lots'"),
        (True, None, "max_lag_records must be a positive integer, got True"),
        (None, 0, "max_lag_age must be a positive number of seconds or a timedelta, got 0"),
        (None, timedelta(0), "max_lag_age must be a positive number"),
        (None, "10m", "max_lag_age must be a positive number of seconds or a timedelta, got '10m'"),
    ],
)
def test_thresholds_refuse_bad_input(records, age, message):
    with pytest.raises(InvalidPipelineSpecError, match=message.replace("(", r"\(")):
        LagThresholds.of(records, age)


# positions and lag ----------------------------------------------------------------------------


def test_unread_positions_are_cursors_of_lagging_partitions_log_start_without_one():
    offsets = {P0: PartitionOffsets(0, 100), P1: PartitionOffsets(10, 50), P2: PartitionOffsets(20, 30)}
    # P0: cursor 60 (lag 40); P1: none, so the log start 10; P2: cursor 5 below the log start 20 (retention)
    assert unread_positions({P0: 60, P2: 5}, offsets) == {P0: 60, P1: 10, P2: 20}
    assert unread_positions({P0: 100, P1: 50, P2: 30}, offsets) == {}


def test_timestamps_needed_only_for_an_age_threshold_not_yet_decided_by_records():
    assert timestamps_needed(CURSORS, OFFSETS, LagThresholds(100, None)) == {}
    assert timestamps_needed(CURSORS, OFFSETS, LagThresholds(40, 60.0)) == {}  # 40 records reached anyway
    assert timestamps_needed(CURSORS, OFFSETS, LagThresholds(41, 60.0)) == {P0: 60}
    assert timestamps_needed(CURSORS, OFFSETS, LagThresholds(None, 60.0)) == {P0: 60}


# decisions ------------------------------------------------------------------------------------


def test_fires_when_lag_reaches_the_record_threshold_exactly():
    assert decide(CURSORS, OFFSETS, {}, LagThresholds(40, None), NOW) == LagDecision(
        True, "lag 40 records >= max_lag_records 40", 40, None
    )
    assert decide(CURSORS, OFFSETS, {}, LagThresholds(41, None), NOW) == LagDecision(
        False, "lag 40 records < 41", 40, None
    )


def test_lag_without_cursors_counts_from_the_log_start():
    # a pipeline the ledger does not know yet: everything Kafka still has is unread
    decision = decide({}, OFFSETS, {}, LagThresholds(147, None), NOW)
    assert (decision.fire, decision.lag_records) == (True, 100 + 40 + 7)


def test_fires_when_the_oldest_unread_record_is_old_enough():
    cursors = {P0: 60, P1: 40, P2: 7}  # P0 and P1 lag
    stamps = {P0: ago(30), P1: ago(90), P2: ago(5000)}  # P2 has no lag: its timestamp does not count
    assert decide(cursors, OFFSETS, stamps, LagThresholds(None, 90.0), NOW) == LagDecision(
        True, "oldest unread record 90s old >= max_lag_age 90s (50 records)", 50, 90.0
    )
    assert decide(cursors, OFFSETS, stamps, LagThresholds(1000, 91.0), NOW) == LagDecision(
        False, "lag 50 records < 1000, oldest unread record 90s old < 91s", 50, 90.0
    )


def test_age_ignores_unknown_timestamps_and_says_when_none_is_known():
    cursors = {P0: 60, P1: 40, P2: 7}
    decision = decide(cursors, OFFSETS, {P0: None, P1: ago(10)}, LagThresholds(None, 60.0), NOW)
    assert (decision.fire, decision.oldest_unread_age_s) == (False, 10.0)
    unknown = decide(cursors, OFFSETS, {P0: None}, LagThresholds(None, 60.0), NOW)
    assert unknown == LagDecision(False, "lag 50 records, age of the oldest unread record unknown", 50, None)
    caught_up = decide({P0: 100, P1: 50, P2: 7}, OFFSETS, {}, LagThresholds(None, 60.0), NOW)
    assert caught_up == LagDecision(False, "lag 0 records, no unread record", 0, None)


def test_the_age_in_words_never_rounds_up_to_the_threshold():
    decision = decide(CURSORS, OFFSETS, {P0: ago(599.6)}, LagThresholds(None, 600.0), NOW)
    assert (decision.fire, decision.reason) == (False, "lag 40 records, oldest unread record 599s old < 600s")


def test_a_record_stamped_in_the_future_counts_as_new():
    decision = decide(CURSORS, OFFSETS, {P0: NOW + timedelta(minutes=5)}, LagThresholds(None, 1.0), NOW)
    assert (decision.fire, decision.oldest_unread_age_s) == (False, 0.0)


def test_the_payload_names_the_pipeline_reason_and_thresholds():
    decision = decide(CURSORS, OFFSETS, {}, LagThresholds(40, 600.0), NOW)
    payload = decision.payload("orders", LagThresholds(40, 600.0))
    assert payload == {
        "pipeline": "orders",
        "reason": "lag 40 records >= max_lag_records 40",
        "lag_records": 40,
        "oldest_unread_age_s": None,
        "max_lag_records": 40,
        "max_lag_age_s": 600.0,
    }
    json.dumps(payload)


# holding after firing -------------------------------------------------------------------------


def test_holds_after_firing_until_a_commit_moves_the_read_positions_or_rearm_passes():
    fired = Fired({P0: 60}, ago(100))
    assert holding(None, {P0: 60}, NOW, 3600) is None
    assert (
        holding(fired, {P0: 60}, NOW, 3600)
        == "fired at 11:58:20 UTC; no batch committed since, fires again from 12:58:20 UTC"
    )
    assert holding(fired, {P0: 100}, NOW, 3600) is None  # the run committed a batch
    assert holding(fired, {P0: 60}, NOW, 100) is None  # no commit in time: fire again


def test_a_new_pipelines_first_plan_does_not_end_the_hold():
    # fired for a pipeline the ledger did not know; its first plan then writes cursors at the log start
    fired = Fired(read_positions({}, OFFSETS), ago(5))
    assert fired.positions == {P0: 0, P1: 10, P2: 0}
    planned = read_positions({P0: 0, P1: 10, P2: 0}, OFFSETS)
    assert holding(fired, planned, NOW, 3600) is not None
    committed = read_positions({P0: 100, P1: 50, P2: 7}, OFFSETS)
    assert holding(fired, committed, NOW, 3600) is None


# the trigger's serialized form ----------------------------------------------------------------


def test_trigger_serializes_to_its_classpath_and_json_kwargs_and_back():
    trigger = KafkaLagTrigger(
        pipeline="orders",
        topics="orders,refunds",
        max_lag_records=500,
        max_lag_age=timedelta(minutes=15),
        poll_interval=timedelta(seconds=20),
        kafka_config_id="kafka_prod",
        postgres_conn_id="ledger_db",
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_kafka_offsets.triggers.lag.KafkaLagTrigger"
    assert kwargs == {
        "pipeline": "orders",
        "topics": ["orders", "refunds"],
        "max_lag_records": 500,
        "max_lag_age": 900.0,
        "poll_interval": 20.0,
        "rearm_after": 3600.0,
        "kafka_config_id": "kafka_prod",
        "postgres_conn_id": "ledger_db",
        "ledger_schema": None,
    }
    assert json.loads(json.dumps(kwargs)) == kwargs
    again = KafkaLagTrigger(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (classpath, kwargs)


def test_trigger_refuses_bad_arguments_when_the_dag_is_parsed():
    with pytest.raises(InvalidPipelineSpecError, match="invalid pipeline name 'no spaces'"):
        KafkaLagTrigger(pipeline="no spaces", topics=["t"], max_lag_records=1)
    with pytest.raises(InvalidPipelineSpecError, match="invalid Kafka topic name 'a/b'"):
        KafkaLagTrigger(pipeline="p", topics=["a/b"], max_lag_records=1)
    with pytest.raises(InvalidPipelineSpecError, match="needs max_lag_records, max_lag_age or both"):
        KafkaLagTrigger(pipeline="p", topics=["t"])
    with pytest.raises(InvalidPipelineSpecError, match="poll_interval must be a positive number"):
        KafkaLagTrigger(pipeline="p", topics=["t"], max_lag_records=1, poll_interval=0)


def test_lag_asset_is_watched_by_the_trigger():
    trigger = KafkaLagTrigger(pipeline="orders", topics=["orders"], max_lag_records=10)
    asset = lag_asset(trigger)
    assert asset.name == asset.uri == "kafka_offsets_lag/orders"
    assert [(w.name, w.trigger) for w in asset.watchers] == [("kafka_offsets_lag_orders", trigger)]


def test_example_dag_is_scheduled_on_the_lag_asset():
    from ..dagbag import DagBag

    path = Path(__file__).resolve().parents[2] / "dags" / "kafka_lag_ingest_example.py"
    bag = DagBag(dag_folder=str(path))
    assert bag.import_errors == {}
    dag = bag.dags["kafka_lag_ingest_example"]
    (asset,) = dag.timetable.asset_condition.objects
    assert asset.name == "kafka_offsets_lag/lag_events"
    ((watcher_trigger),) = [w.trigger for w in asset.watchers]
    assert watcher_trigger.serialize()[1] | {"topics": ["lag-events"]} == watcher_trigger.serialize()[1]
    assert (watcher_trigger.thresholds.records, watcher_trigger.thresholds.age_s) == (100, 600.0)
    assert sorted(dag.task_dict) == ["ingest.commit", "ingest.plan", "ingest.read"]


def test_airflow_lists_the_trigger_module_from_provider_info():
    from airflow.providers_manager import ProvidersManager

    ours = [t for t in ProvidersManager().trigger if t.package_name == "airflow-kafka-offsets"]
    assert sorted((t.trigger_class_name, t.integration_name) for t in ours) == [
        ("airflow_kafka_offsets.triggers.lag", "Kafka Offsets"),
        ("airflow_kafka_offsets.triggers.retention", "Kafka Offsets"),
    ]


def test_retention_example_dag_is_scheduled_on_the_retention_risk_asset():
    from ..dagbag import DagBag

    path = Path(__file__).resolve().parents[2] / "dags" / "kafka_retention_warning_example.py"
    bag = DagBag(dag_folder=str(path))
    assert bag.import_errors == {}
    dag = bag.dags["kafka_retention_warning_example"]
    (asset,) = dag.timetable.asset_condition.objects
    assert (asset.name, asset.uri) == (
        "kafka_offsets_retention_risk/lag_events",
        "kafka-offsets://lag_events/retention-risk",
    )
    ((watcher_trigger),) = [w.trigger for w in asset.watchers]
    assert watcher_trigger.serialize() == (
        "airflow_kafka_offsets.triggers.retention.KafkaRetentionRiskTrigger",
        {
            "pipeline": "lag_events",
            "topics": ["lag-events"],
            "poll_interval": 60.0,
            "rearm_after": 3600.0,
            "kafka_config_id": "kafka_default",
            "postgres_conn_id": "postgres_default",
            "ledger_schema": None,
            "warn_within": 1800.0,
        },
    )
    assert sorted(dag.task_dict) == ["ingest.commit", "ingest.plan", "ingest.read"]
