"""S3-compatible object storage from an Airflow connection: the provider's own type, or ``aws``.

The provider registers the connection type (its form is declared in the provider info, see
:mod:`airflow_kafka_offsets.object_storage.connection`), so Airflow's UI offers it without
the Amazon provider; an ``aws`` connection is read by the same code.
"""

from __future__ import annotations

from airflow.sdk import BaseHook

from airflow_kafka_offsets.core.defaults import DEFAULT_OBJECT_STORAGE_CONN_ID
from airflow_kafka_offsets.hooks.connections import get_connection
from airflow_kafka_offsets.object_storage.access import S3Access, s3_access, s3a_spark_conf
from airflow_kafka_offsets.object_storage.connection import CONN_TYPE, HOOK_NAME, check_conn_type


class ObjectStorageHook(BaseHook):
    """Who to be and where S3 is, from the connection ``object_storage_conn_id`` (its secret stays in
    the returned :class:`S3Access`, never in a message or its repr)."""

    conn_name_attr = "object_storage_conn_id"
    default_conn_name = DEFAULT_OBJECT_STORAGE_CONN_ID
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(self, object_storage_conn_id: str = default_conn_name, purpose: str = "") -> None:
        """``purpose`` (e.g. ``"for s3://lake/out"``) goes into the errors that name the connection."""
        super().__init__()
        self.object_storage_conn_id = object_storage_conn_id
        self.purpose = purpose

    def get_conn(self) -> S3Access:
        conn_id = self.object_storage_conn_id
        conn = get_connection(conn_id, f"S3 ({self.purpose})" if self.purpose else "S3")
        check_conn_type(conn_id, conn.conn_type)
        return s3_access(conn_id, conn.login, conn.password, conn.extra_dejson)

    def get_spark_conf(self) -> dict[str, str]:
        """The connection as Spark's S3A settings (``spark.hadoop.fs.s3a.*``, the secret included: hand
        them to ``SparkSettings(private_conf=...)``, which keeps them off the command line)."""
        return s3a_spark_conf(self.get_conn())
