"""Triggers for Airflow's triggerer: lag-driven scheduling of ingest DAGs."""

from airflow_kafka_offsets.triggers.lag import KafkaLagTrigger, lag_asset

__all__ = ["KafkaLagTrigger", "lag_asset"]
