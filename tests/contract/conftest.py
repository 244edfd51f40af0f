"""Both ledgers behind one fixture: the contract tests run against each (PostgreSQL: integration-marked)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg2
import pytest

from airflow_kafka_offsets.clients.memory import MemoryKafka
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.ledger.memory import MemoryLedger
from airflow_kafka_offsets.ledger.port import LedgerPort
from airflow_kafka_offsets.sinks.memory import MemorySink, MemorySpark

LOCK_TIMEOUT_S = 0.2


@dataclass
class World:
    """A ledger of either kind with in-memory Kafka, sink and Spark around it."""

    ledger: LedgerPort
    kafka: MemoryKafka
    sink: MemorySink
    spark: MemorySpark

    def audit(self, pipeline: str) -> list[tuple[int | None, str, dict[str, Any]]]:
        """The pipeline's audit trail as (batch id, event, detail), oldest first."""
        if isinstance(self.ledger, MemoryLedger):
            return [(e.batch_id, e.event, dict(e.detail)) for e in self.ledger.audit_entries(pipeline)]
        assert isinstance(self.ledger, Ledger)
        with self.ledger.transaction() as tx:
            rows = tx.fetchall(
                "SELECT batch_id, event, detail FROM {s}.audit WHERE pipeline = %s ORDER BY id", (pipeline,)
            )
        return [(b, e, d if isinstance(d, dict) else json.loads(d)) for b, e, d in rows]


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The stack's PostgreSQL (reused when running; a stack that cannot start fails the tests)."""
    import devstack

    return devstack.up().pg_dsn()


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.integration)])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    kafka, sink = MemoryKafka(), MemorySink()
    if request.param == "memory":
        yield World(MemoryLedger(), kafka, sink, MemorySpark(kafka, sink))
        return
    dsn = request.getfixturevalue("pg_dsn")
    ledger = Ledger(lambda: psycopg2.connect(dsn), schema=f"t_{uuid.uuid4().hex[:12]}", lock_timeout_s=LOCK_TIMEOUT_S)
    ledger.migrate()
    yield World(ledger, kafka, sink, MemorySpark(kafka, sink))
    ledger.close()
