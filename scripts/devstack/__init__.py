"""Local development stack for airflow-kafka-offsets: PostgreSQL 15, a Kafka KRaft
broker, an S3 server (SeaweedFS), a schema registry (Apicurio Registry) and (optionally) a Spark
standalone cluster and a Spark Connect server, all on 127.0.0.1.

CLI: ``scripts/stack up|down|status|env|jars`` (= ``python -m devstack`` with
PYTHONPATH=scripts). Python API for pytest fixtures and benchmarks::

    import devstack
    info = devstack.up()              # idempotent; reuses a running stack
    info.bootstrap_servers, info.pg_dsn(), info.airflow_env()
    info.sasl_bootstrap_servers, info.sasl_client_config()   # SASL_PLAINTEXT/PLAIN listener
    info.sasl_ssl_bootstrap_servers, info.sasl_ssl_client_config()   # SASL_SSL/SCRAM-SHA-512, info.ssl_ca_file
    info.s3_credentials(), info.s3_connection()   # the S3 server's key; its Airflow `aws` connection
    info.schema_registry_url, info.schema_registry_client_config()   # Confluent-compatible API, basic auth
    devstack.restart_kafka(); devstack.restart_postgres(); devstack.restart_s3()
    devstack.restart_schema_registry(); devstack.restart_iceberg_rest()
    devstack.start_airflow()          # api-server, scheduler, dag-processor, triggerer on dags/
    devstack.stop_airflow()
    devstack.start_cdc()              # Debezium on Kafka Connect, JSON and Avro topics (scripts/stack up --cdc)
    devstack.start_spark_connect()    # a Spark Connect server; its `spark_connect` connection
    devstack.restart_spark_connect(hard=True)   # crash and start it again, same port and token
    devstack.start_spark_connect("4.1")   # a Connect server of another Spark line (spark_lines)
    devstack.stop_spark_connect("4.1")
    devstack.start_toxiproxy()        # toxiproxy before each service; the connections through it (toxiproxy.py)
    devstack.stop_toxiproxy()
    devstack.down()

The broker has a second client listener, SASL_PLAINTEXT with mechanism PLAIN, for one user
(``ako``) whose password is generated once per stack (``<state>/kafka-sasl-password``, 0600).
A third, SASL_SSL with mechanism SCRAM-SHA-512, serves a certificate of a CA made for the stack
(``<state>/kafka-tls/ca.pem``; the broker's PKCS12 key store and its password beside it, 0700/0600)
to the SCRAM user ``ako-scram`` (password in ``<state>/kafka-scram-password``, 0600), created
through Kafka's admin API after the broker's first start. A stack started before these listeners
existed gets them on the next ``up`` (one broker restart, same ports and data). The PLAINTEXT
listener and ``airflow_env()`` are unchanged; ``airflow_env(kafka_sasl_ssl=True)`` (what
``scripts/stack env`` prints) adds the SASL_SSL listener as the ``kafka`` connection ``kafka_sasl_ssl``.

The S3 server accepts one key (``<state>/s3/identities.json``, 0600), has one bucket
(``kafka-offsets``) and is exported as the ``aws`` connection ``kafka_offsets_s3``; Spark reaches
it through the S3A jars (``info.s3a_jars``, also in ``AIRFLOW__KAFKA_OFFSETS__SPARK_JARS``).

``devstack.spark_lines.spark_home("3.5")`` installs (once) the Spark home of another Spark line,
beside the venv; ``devstack.jars.fetch_connector("3.5.7")`` fetches that line's connector.

The schema registry is Apicurio Registry's release build (Maven Central) on a JDK 21+, serving the
Confluent Schema Registry API at ``/apis/ccompat/v7`` to one basic-auth user (``ako``, password in
``<state>/schema-registry-password``, 0600), exported as the connection ``schema_registry_default``
(type ``kafka_offsets_schema_registry``); see ``schema_registry.py``.

A fourth client listener, ``PROXIED`` (PLAINTEXT), advertises the port toxiproxy listens on for the
broker (``toxiproxy.py``, started on demand by ``start_toxiproxy()``, never by ``up``), so a client
bootstrapped through the proxy keeps going through it.

Stdlib only, plus psycopg2 for creating the ``ledger`` database.
"""

from __future__ import annotations

from .cdc import topic as cdc_topic
from .errors import StackError
from .info import StackInfo
from .optional import (
    airflow_cli,
    restart_spark_connect,
    start_airflow,
    start_cdc,
    start_spark_cluster,
    start_spark_connect,
    start_toxiproxy,
    stop_airflow,
    stop_spark_cluster,
    stop_spark_connect,
    stop_toxiproxy,
)
from .report import status
from .stack import (
    current,
    down,
    restart_iceberg_rest,
    restart_kafka,
    restart_postgres,
    restart_s3,
    restart_schema_registry,
    up,
)

__all__ = [
    "StackError",
    "StackInfo",
    "airflow_cli",
    "cdc_topic",
    "current",
    "down",
    "restart_iceberg_rest",
    "restart_kafka",
    "restart_postgres",
    "restart_s3",
    "restart_schema_registry",
    "restart_spark_connect",
    "start_airflow",
    "start_cdc",
    "start_spark_cluster",
    "start_spark_connect",
    "start_toxiproxy",
    "status",
    "stop_airflow",
    "stop_spark_cluster",
    "stop_spark_connect",
    "stop_toxiproxy",
    "up",
]
