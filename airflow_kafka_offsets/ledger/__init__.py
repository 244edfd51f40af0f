"""The PostgreSQL ledger: schema and migrations, plans, attempts, commits, resets, audit."""

from airflow_kafka_offsets.ledger.store import (
    Attempt,
    BatchRecord,
    Ledger,
    LedgerTransaction,
    describe_actor,
    raise_for_state,
)

__all__ = ["Attempt", "BatchRecord", "Ledger", "LedgerTransaction", "describe_actor", "raise_for_state"]
