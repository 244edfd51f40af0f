"""The PostgreSQL ledger: schema and migrations, plans, attempts, commits, resets, audit."""

from airflow_kafka_offsets.core.actor import Actor, describe_actor
from airflow_kafka_offsets.ledger.attempts import Attempt
from airflow_kafka_offsets.ledger.batches import BatchRecord, BatchSummary, RangesShown, raise_for_state
from airflow_kafka_offsets.ledger.commits import CommittedCount, CommittedOutput
from airflow_kafka_offsets.ledger.store import Ledger, LedgerTransaction

__all__ = [
    "Actor",
    "Attempt",
    "BatchRecord",
    "BatchSummary",
    "CommittedCount",
    "CommittedOutput",
    "Ledger",
    "LedgerTransaction",
    "RangesShown",
    "describe_actor",
    "raise_for_state",
]
