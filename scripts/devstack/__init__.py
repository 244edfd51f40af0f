"""Local development stack for airflow-kafka-offsets: PostgreSQL 15, a Kafka KRaft
broker and (optionally) a Spark standalone cluster, all on 127.0.0.1.

CLI: ``scripts/stack up|down|status|env|jars`` (= ``python -m devstack`` with
PYTHONPATH=scripts). Python API for pytest fixtures and benchmarks::

    import devstack
    info = devstack.up()              # idempotent; reuses a running stack
    info.bootstrap_servers, info.pg_dsn(), info.airflow_env()
    devstack.restart_kafka(); devstack.restart_postgres()
    devstack.down()

Stdlib only, plus psycopg2 for creating the ``ledger`` database.
"""
from __future__ import annotations

from .errors import StackError
from .info import StackInfo
from .stack import (
                    current,
                    down,
                    restart_kafka,
                    restart_postgres,
                    start_spark_cluster,
                    status,
                    stop_spark_cluster,
                    up,
)

__all__ = ["StackError", "StackInfo", "current", "down", "restart_kafka", "restart_postgres",
           "start_spark_cluster", "status", "stop_spark_cluster", "up"]
