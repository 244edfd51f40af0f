"""A mirror batch's change set and Spark's rewrites as the commit step reads them, for either table format.

Spark wrote the change set to ``<attempt>/_changes/`` (``spark_apps/kafka_batch_changes.py``): one row per
changed key, the key's row now (null columns but the key for a delete), where the change came from, and
``_deleted``. Both table sinks (``iceberg_merge``, ``delta_merge``) read it with pyarrow only: it is the
batch's size, never the table's. Spark also rewrote the table's data files that hold a changed key, without
those rows (``spark_apps/kafka_batch_rewrite.py``), from the files and key bounds the sink listed for the job
(``merge.rewrite``); the commit swaps them in when the table is still at the version they were made from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_kafka_offsets.errors import ReportMismatchError
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.object_storage.storage import DataFile, Storage
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import DELETED, REWRITE_OF, REWRITES_DIR

# A string bound this long may be a truncated prefix (Iceberg truncates to 16 characters, Delta writers to 32 or
# fewer): as an upper bound it says nothing.
STRING_BOUND_LENGTH = 16


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


def key_bound(value: Any, upper: bool) -> Any:
    """A data file's bound of the key's first column as the job lists it: an int or a string (any other type,
    or a string upper bound that may be truncated, is unknown: null)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    if upper and isinstance(value, str) and len(value) >= STRING_BOUND_LENGTH:
        return None
    return value


@dataclass(frozen=True)
class RewrittenFile:
    """A data file Spark rewrote without its changed keys' rows: ``removed`` rows fewer, in ``files`` (none:
    every row of it went)."""

    path: str
    removed: int
    files: tuple[DataFile, ...]


@dataclass(frozen=True)
class SparkRewrite:
    """Spark's rewrites of the table's data files as of version (Iceberg: snapshot) ``base`` (None: the table
    had none)."""

    base: str | None
    rewritten: tuple[RewrittenFile, ...]


def spark_rewrite(storage: Storage, staging_uri: str | None, report: Mapping[str, Any] | None) -> SparkRewrite | None:
    """Spark's rewrites as an attempt's report gives them (its ``changes.rewrite``), each with the files in its
    directory under the attempt's staging; None for an attempt whose job asked for none."""
    rewrite = ((report or {}).get("changes") or {}).get("rewrite")
    if staging_uri is None or rewrite is None:
        return None
    root = files.join(staging_uri, REWRITES_DIR)
    rewritten = tuple(
        RewrittenFile(
            f["path"], int(f["removed"]), tuple(storage.parquet_files(files.join(root, f"{REWRITE_OF}={f['place']}")))
        )
        for f in rewrite["files"]
    )
    return SparkRewrite(rewrite["base"], rewritten)


def check_rewrite(file: RewrittenFile, records: int | None) -> None:
    """Refuse a rewrite that does not hold the rewritten file's ``records`` (None: the file is not in the table)
    less the rows Spark counted as changed: committing it would lose or repeat rows."""
    rows = sum(f.records for f in file.files)
    if records is None or rows != records - file.removed:
        raise ReportMismatchError(
            f"Spark's rewrite of the mirror's data file {file.path} holds {rows} rows, but the file "
            + ("is not in the table" if records is None else f"has {records} of which {file.removed} change")
            + "; nothing was committed, the batch stays planned: run it again"
        )
