"""Local development stack for airflow-kafka-offsets: PostgreSQL 15, a Kafka KRaft
broker, an S3 server (SeaweedFS) and (optionally) a Spark standalone cluster and a Spark Connect
server, all on 127.0.0.1.

CLI: ``scripts/stack up|down|status|env|jars`` (= ``python -m devstack`` with
PYTHONPATH=scripts). Python API for pytest fixtures and benchmarks::

    import devstack
    info = devstack.up()              # idempotent; reuses a running stack
    info.bootstrap_servers, info.pg_dsn(), info.airflow_env()
    info.sasl_bootstrap_servers, info.sasl_client_config()   # SASL_PLAINTEXT/PLAIN listener
    info.s3_credentials(), info.s3_connection()   # the S3 server's key; its Airflow `aws` connection
    devstack.restart_kafka(); devstack.restart_postgres(); devstack.restart_s3()
    devstack.start_airflow()          # api-server, scheduler, dag-processor, triggerer on dags/
    devstack.stop_airflow()
    devstack.start_spark_connect()    # a Spark Connect server; its `spark_connect` connection
    devstack.restart_spark_connect(hard=True)   # crash and start it again, same port and token
    devstack.down()

The broker has a second client listener, SASL_PLAINTEXT with mechanism PLAIN, for one user
(``ako``) whose password is generated once per stack (``<state>/kafka-sasl-password``, 0600).
A stack started before that listener existed gets it on the next ``up`` (one broker restart,
same ports and data). The PLAINTEXT listener and ``airflow_env()`` are unchanged.

The S3 server accepts one key (``<state>/s3/identities.json``, 0600), has one bucket
(``kafka-offsets``) and is exported as the ``aws`` connection ``kafka_offsets_s3``; Spark reaches
it through the S3A jars (``info.s3a_jars``, also in ``AIRFLOW__KAFKA_OFFSETS__SPARK_JARS``).

Stdlib only, plus psycopg2 for creating the ``ledger`` database.
"""

from __future__ import annotations

from .errors import StackError
from .info import StackInfo
from .stack import (
    airflow_cli,
    current,
    down,
    restart_kafka,
    restart_postgres,
    restart_s3,
    restart_spark_connect,
    start_airflow,
    start_spark_cluster,
    start_spark_connect,
    status,
    stop_airflow,
    stop_spark_cluster,
    stop_spark_connect,
    up,
)

__all__ = [
    "StackError",
    "StackInfo",
    "airflow_cli",
    "current",
    "down",
    "restart_kafka",
    "restart_postgres",
    "restart_s3",
    "restart_spark_connect",
    "start_airflow",
    "start_spark_cluster",
    "start_spark_connect",
    "status",
    "stop_airflow",
    "stop_spark_cluster",
    "stop_spark_connect",
    "up",
]
