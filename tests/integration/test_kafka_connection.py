"""A ``kafka`` connection exactly as the apache-kafka provider defines it (type ``kafka``, its
form's Config Dict as extra) passes the provider's connection test, as the UI's Test button runs
it, and drives a batch (plan, Spark read, commit) over SASL, exactly once."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_kafka_offsets.core.model import TopicPartition as TP

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce

CONN_ID = "kafka_provider_form"


@pytest.fixture()
def provider_kafka_connection(stack, monkeypatch) -> str:
    """The client config as the provider's form takes it, here with the ``group.id`` its placeholder
    suggests (a batch read must ignore it)."""
    extra = {**stack.sasl_client_config(), "group.id": "my-group"}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({"conn_type": "kafka", "extra": extra}))
    return CONN_ID


def test_a_kafka_connection_as_the_provider_defines_it_drives_a_batch(
    stack, ledger, schema, make_topic, tmp_path, provider_kafka_connection
):
    from airflow.models import Connection
    from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

    from airflow_kafka_offsets.operators import (
        KafkaBatchCommitOperator,
        KafkaBatchPlanOperator,
        KafkaBatchSparkOperator,
    )

    # The UI's Test button: the hook of the connection's type (the provider's), its test_connection.
    connection = Connection.get_connection_from_secrets(provider_kafka_connection)
    assert type(connection.get_hook()) is KafkaBaseHook
    assert connection.test_connection() == (True, "Connection successful.")

    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, 30, partitions=3)
    pipeline = f"provider_{schema}"
    common = {"pipeline": pipeline, "ledger_schema": schema, "kafka_conn_id": provider_kafka_connection}
    planned = KafkaBatchPlanOperator(
        task_id="plan", topics=[topic], output_root=str(tmp_path / "out"), **common
    ).execute({})
    assert (planned["batch_id"], planned["records_planned"]) == (1, 30)
    read = KafkaBatchSparkOperator(task_id="read", batch_id=1, **common).execute({})
    assert read == {"pipeline": pipeline, "batch_id": 1, "records_read": 30}
    committed = KafkaBatchCommitOperator(task_id="commit", batch_id=1, **common).execute(
        {"outlet_events": OutletEventAccessors()}  # what Airflow's task runner hands the commit step
    )
    assert (committed["batch_id"], committed["records"], committed["committed_now"]) == (1, 30, True)

    assert ledger.cursors(pipeline) == {TP(topic, p): 10 for p in range(3)}
    assert ledger_ranges(ledger, pipeline) == [(1, "committed", topic, p, 0, 0, 10, 10) for p in range(3)]
    assert_exactly_once(committed_rows(ledger, pipeline), produced)
