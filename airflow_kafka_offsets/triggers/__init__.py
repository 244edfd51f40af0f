"""Triggers for Airflow's triggerer: lag-driven scheduling of ingest DAGs, a warning before Kafka's
retention deletes unread records, and a freshness deadline (Deadline Alerts) whose callback runs
in the triggerer."""

from airflow_kafka_offsets.triggers.deadlines import freshness_deadline, freshness_missed
from airflow_kafka_offsets.triggers.lag import KafkaLagTrigger, lag_asset
from airflow_kafka_offsets.triggers.retention import KafkaRetentionRiskTrigger, retention_risk_asset

__all__ = [
    "KafkaLagTrigger",
    "KafkaRetentionRiskTrigger",
    "freshness_deadline",
    "freshness_missed",
    "lag_asset",
    "retention_risk_asset",
]
