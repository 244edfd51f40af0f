"""The PostgreSQL ledger: schema and migrations, plans, attempts, commits, resets, audit."""

from airflow_kafka_offsets.core.actor import Actor, describe_actor
from airflow_kafka_offsets.ledger.store import Attempt, BatchRecord, Ledger, LedgerTransaction, raise_for_state

__all__ = ["Actor", "Attempt", "BatchRecord", "Ledger", "describe_actor", "LedgerTransaction", "raise_for_state"]
