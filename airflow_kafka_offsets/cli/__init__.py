"""The operations from a shell: the ``airflow-kafka-offsets`` console script (:mod:`.console`) and
``airflow kafka-offsets`` in Airflow's own CLI (:mod:`.definition`), one set of options
(:mod:`.arguments`) and one runner (:mod:`.runner`) for both."""

from airflow_kafka_offsets.cli.arguments import request_from_args
from airflow_kafka_offsets.cli.console import build_parser, main

__all__ = ["build_parser", "main", "request_from_args"]
