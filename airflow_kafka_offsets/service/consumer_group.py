"""The pipeline's Kafka consumer group, a mirror of the ledger's cursors for tools that watch groups."""

from __future__ import annotations

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.ledger import Ledger


def mirror_to_consumer_group(ledger: Ledger, kafka: KafkaOffsetsClient, pipeline: str) -> str | None:
    """Copy the committed cursors into the pipeline's consumer group, if it has one (never read back)."""
    with ledger.transaction() as tx:
        spec = tx.pipeline_spec(pipeline)
        cursors = tx.cursors(pipeline)
    if not spec.consumer_group:
        return None
    kafka.mirror_consumer_group(spec.consumer_group, {tp: o for tp, o in cursors.items() if tp.topic in spec.topics})
    return spec.consumer_group
