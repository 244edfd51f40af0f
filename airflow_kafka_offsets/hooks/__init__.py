"""Hooks own the Airflow connections: Kafka, PostgreSQL for the ledger, S3 object storage, the schema registry,
the Iceberg REST catalog and Spark (read once, handed to spark/)."""

from airflow_kafka_offsets.hooks.kafka import KafkaClusterHook
from airflow_kafka_offsets.hooks.ledger import LedgerHook
from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook
from airflow_kafka_offsets.hooks.schema_registry import SchemaRegistryHook

__all__ = ["KafkaClusterHook", "LedgerHook", "ObjectStorageHook", "SchemaRegistryHook"]
