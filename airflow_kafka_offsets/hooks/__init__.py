"""Hooks own the Airflow connections: Kafka, PostgreSQL for the ledger, and S3 object storage."""

from airflow_kafka_offsets.hooks.kafka import KafkaClusterHook
from airflow_kafka_offsets.hooks.ledger import LedgerHook
from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook

__all__ = ["KafkaClusterHook", "LedgerHook", "ObjectStorageHook"]
