"""Talking to the outside: Kafka (offsets, admin), spark-submit, and version checks of Spark's jars."""
