"""Triggers for Airflow's triggerer: lag-driven scheduling of ingest DAGs, and a warning before
Kafka's retention deletes unread records."""

from airflow_kafka_offsets.triggers.lag import KafkaLagTrigger, lag_asset
from airflow_kafka_offsets.triggers.retention import KafkaRetentionRiskTrigger, retention_risk_asset

__all__ = ["KafkaLagTrigger", "KafkaRetentionRiskTrigger", "lag_asset", "retention_risk_asset"]
