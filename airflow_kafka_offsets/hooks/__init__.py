"""Hooks own the Airflow connections: Kafka, and PostgreSQL for the ledger."""

from airflow_kafka_offsets.hooks.kafka import KafkaClusterHook
from airflow_kafka_offsets.hooks.ledger import LedgerHook

__all__ = ["KafkaClusterHook", "LedgerHook"]
