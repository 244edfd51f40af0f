"""The Spark connection of a batch's read, read from Airflow once into a
:class:`~airflow_kafka_offsets.spark.connection.SparkConnection` that ``runtime.py`` hands to ``spark/``.

Its types are the Spark provider's: ``spark`` (spark-submit; the connection's master as host) and
``spark_connect`` (a Spark Connect server: host, port, login = user id, password = token, extra
``use_ssl``; its ``sc://`` URL built by the provider's ``SparkConnectHook``). Its secrets (the token,
the URL that holds it, a keytab in the extra) are masked in task logs.
"""

from __future__ import annotations

from dataclasses import replace

from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.connections import get_connection, mask_secrets
from airflow_kafka_offsets.spark.connection import SparkConnection

# Without its connection, the Spark provider's SparkSubmitHook silently submits to master 'yarn'.
NOT_YARN = "spark-submit default to YARN"


def spark_connection(conn_id: str) -> SparkConnection:
    """The connection ``conn_id``, refused (ConfigurationError) when it is missing, cannot be read or
    has no host."""
    example = '\'{"conn_type": "spark", "host": "local[2]"}\''
    conn = get_connection(
        conn_id,
        "Spark",
        if_missing=f"; define it (e.g. AIRFLOW_CONN_{conn_id.upper()}={example}) rather than letting {NOT_YARN}",
        if_unreadable=f"; refusing to let {NOT_YARN}",
    )
    resolved = SparkConnection(conn_id, conn.conn_type or "", conn.host or "", conn.port, dict(conn.extra_dejson))
    if not resolved.host.strip():
        if resolved.is_connect:
            raise ConfigurationError(
                f"Spark Connect connection {conn_id!r} has no host: set it to the server (e.g. host localhost, "
                "port 15002)"
            )
        raise ConfigurationError(
            f"Spark connection {conn_id!r} has no host: set it to the Spark master (local[2], spark://host:7077, "
            "yarn, k8s://...)"
        )
    url = _connect_url(conn_id) if resolved.is_connect else None
    mask_secrets(tuple(s for s in (conn.password, resolved.extra.get("keytab"), url) if isinstance(s, str) and s))
    return replace(resolved, url=url)


def _connect_url(conn_id: str) -> str:
    """The ``sc://`` URL of a ``spark_connect`` connection, as the Spark provider builds it (holds the token)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook  # for this type only

    try:
        return str(SparkConnectHook(conn_id).get_connection_url())
    except ValueError as exc:
        raise ConfigurationError(f"Spark Connect connection {conn_id!r}: {exc}") from exc
