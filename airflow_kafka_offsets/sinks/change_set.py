"""A mirror batch's change set as the commit step reads it, for either table format.

Spark wrote it to ``<attempt>/_changes/`` (``spark_apps/kafka_batch_changes.py``): one row per changed
key, the key's row now (null columns but the key for a delete), where the change came from, and
``_deleted``. Both table sinks (``iceberg_merge``, ``delta_merge``) read it with pyarrow only: it is the
batch's size, never the table's.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_kafka_offsets.object_storage.storage import Storage
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import DELETED


def read_changes(storage: Storage, uris: Sequence[str]) -> pa.Table | None:
    """The change set's files as one Arrow table (None: an attempt that wrote none)."""
    parts = []
    for uri in uris:
        fs, path = storage.filesystem(uri)
        parts.append(pq.read_table(path, filesystem=fs))
    return pa.concat_tables(parts) if parts else None


def put_rows(changes: pa.Table) -> pa.Table:
    """The rows the batch puts (its changes that do not delete), without ``_deleted``."""
    return changes.filter(pc.invert(changes.column(DELETED))).drop_columns([DELETED])
