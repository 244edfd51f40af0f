"""Actor: the ledger stores exactly the document an edge built, and reads it back unchanged."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from airflow_kafka_offsets.core.actor import Actor, describe_actor, with_approval
from airflow_kafka_offsets.ledger.sql import jsonb
from airflow_kafka_offsets.operators.ingest import actor_from_context
from airflow_kafka_offsets.runtime import cli_actor


def stored(document: dict) -> str:
    """What the ledger stored for an actor before Actor existed (a dict through json.dumps)."""
    return json.dumps(document, sort_keys=True, default=str)


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"dag_id": "tests", "run_id": "manual"},
        {"test": True},
        {"dag_id": "d", "run_id": "r", "task_id": None, "try_number": None, "map_index": None, "hostname": "h"},
        {"cli": "reset", "user": None, "hostname": "h", "pid": 7},
        {"run_id": "r", "operation": "replay", "extra": {"nested": [1, 2]}},
    ],
)
def test_a_document_reads_back_and_is_stored_byte_for_byte_as_before(document):
    actor = Actor.from_json(document)
    assert actor.to_json() == document
    assert jsonb(actor.to_json()) == stored(document)
    assert Actor.from_json(actor.to_json()) == actor


def test_a_task_actor_stores_every_key_of_its_task_instance_even_unset_ones():
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="t", try_number=2, map_index=None)
    actor = actor_from_context({"ti": ti})
    document = actor.to_json()
    assert (actor.dag_id, actor.run_id, actor.task_id, actor.try_number, actor.map_index) == ("d", "r", "t", 2, None)
    assert set(document) == {"dag_id", "run_id", "task_id", "try_number", "map_index", "hostname", "pid"}
    assert document["map_index"] is None
    # the manual-operations operator adds the operation it ran
    assert replace(actor, operation="reset").to_json() == {**document, "operation": "reset"}


def test_a_shell_actor_names_the_command_and_user(monkeypatch):
    monkeypatch.delenv("USER", raising=False)
    document = cli_actor("reset").to_json()
    assert set(document) == {"cli", "user", "hostname", "pid"}
    assert (document["cli"], document["user"]) == ("reset", None)


def test_an_approved_operations_actor_names_the_approver_and_the_digest_approved():
    task = Actor.from_json({"dag_id": "ops", "run_id": "r", "task_id": "operation", "map_index": None})
    airflow_user = {"id": "7", "name": "alice"}  # HITL's responded_by_user
    approved = with_approval(replace(task, operation="reset"), "ab" * 32, airflow_user)
    # the audit row's actor document: the task, the operation, who approved and what
    assert approved.to_json() == {
        "approved_by": "alice",
        "approved_by_id": "7",
        "approved_digest": "ab" * 32,
        "dag_id": "ops",
        "map_index": None,
        "operation": "reset",
        "run_id": "r",
        "task_id": "operation",
    }
    assert Actor.from_json(approved.to_json()) == approved
    assert with_approval(task, "cd" * 32, "bob").to_json()["approved_by"] == "bob"
    assert "approved_by_id" not in with_approval(task, "cd" * 32, "bob").to_json()
    nobody = with_approval(task, "cd" * 32, None).to_json()  # a digest given without an approver
    assert nobody["approved_digest"] == "cd" * 32 and "approved_by" not in nobody
    # rows an older version stored (no approval keys) read back unchanged
    assert Actor.from_json(task.to_json()).approved_by is None
    assert approved.describe() == "run r (dag ops, task operation, approved by alice)"


def test_describe_names_the_run_and_what_is_known_of_the_task():
    assert Actor(dag_id="d", run_id="r", task_id="t", try_number=3).describe() == "run r (dag d, task t, try 3)"
    assert Actor(run_id="r").describe() == "run r"
    assert describe_actor(Actor.from_json({"cli": "abort"})) == "run None"
    assert describe_actor(None) == "run None"
