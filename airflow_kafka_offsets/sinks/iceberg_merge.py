"""A mirror table's merge: a batch's change set applied to an Iceberg table in one copy-on-write commit.

Spark computed the change set (the last change per key, ``spark_apps/kafka_batch_changes.py``); here
it is applied inside the caller's table transaction (for the ledger's catalog: with the catalog row
locked, in the ledger's transaction): each data file that holds a changed key is replaced by its rewrite
without the changed keys' rows, then the batch's rows are added. No equality or position deletes are
written: every reader sees plain data files.

The rewrites are Spark's (``spark_apps/kafka_batch_rewrite.py``, from the live files and key bounds that
:func:`rewrite_job` gives the job) when the table is still at the snapshot they were computed on: the worker
then reads only Parquet footers, each rewrite checked to hold its file's rows less the ones Spark counted as
changed. When the table moved since (another writer, a compaction, a replay putting back an earlier state),
they would rest on a stale base: the worker rewrites the files of the table as it is now, reading only those
whose key statistics overlap the changed keys' ranges, one at a time. Either way it holds at most the change
set (the batch's size) and one data file, never the table.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThanOrEqual, Or
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, TableProperties, Transaction, _parquet_files_to_data_files
from pyiceberg.types import IntegerType, LongType, StringType

from airflow_kafka_offsets.errors import MergeOperationRefusedError
from airflow_kafka_offsets.sinks.change_set import SparkRewrite, check_rewrite, key_bound, put_rows

log = logging.getLogger(__name__)


def _balanced_or(terms: list[BooleanExpression]) -> BooleanExpression:
    """An Or of many terms as a balanced tree: expression visitors recurse once per level."""
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return Or(_balanced_or(terms[:middle]), _balanced_or(terms[middle:]))


# PyIceberg's predicates take (column, value) positionally; mypy sees only their pydantic fields' keywords.
_AT_LEAST: Any = GreaterThanOrEqual
_AT_MOST: Any = LessThanOrEqual


# A change set's keys are cut into at most this many ranges, at their widest gaps: the data files whose key
# bounds miss every range are not read (changes to recent rows and a few old ones need more than one range).
KEY_RANGES = 16


def key_ranges(values: Sequence[Any], most: int = KEY_RANGES) -> list[Sequence[Any]]:
    """Sorted distinct ``values`` cut at their ``most - 1`` widest gaps (numbers; other types: one range)."""
    if len(values) < 2 or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [values]
    gaps = sorted(range(1, len(values)), key=lambda i: values[i] - values[i - 1], reverse=True)[: most - 1]
    cuts = [0, *sorted(i for i in gaps if values[i] - values[i - 1] > 1), len(values)]
    return [values[start:end] for start, end in itertools.pairwise(cuts)]


def candidate_filter(keys: pa.Table, key: Sequence[str]) -> BooleanExpression:
    """The ranges of the first key column's changed values: a data file whose statistics miss all of them
    holds no changed key. Ranges, not the keys: PyIceberg binds an expression's literals again for every
    file it evaluates, and prunes nothing by an IN of more than 200 values."""
    values = sorted(set(keys.column(key[0]).to_pylist()))
    return _balanced_or([And(_AT_LEAST(key[0], part[0]), _AT_MOST(key[0], part[-1])) for part in key_ranges(values)])


_BOUNDED_TYPES = (IntegerType, LongType, StringType)


def rewrite_job(table: Table | None, key: Sequence[str]) -> dict[str, Any]:
    """The job's ``merge.rewrite`` (``spark_apps/kafka_batch_contract.py``): the table's live data files at its
    current snapshot, each with the bounds of the first key column its metadata records (ints and strings;
    null: unknown). Metadata only: no data file is read."""
    snapshot = table.current_snapshot() if table is not None else None
    if table is None or snapshot is None:
        return {"base": None, "files": []}
    field = table.schema().find_field(key[0])
    kind = field.field_type

    def bound(bounds: Mapping[int, bytes] | None, upper: bool) -> Any:
        raw = (bounds or {}).get(field.field_id)
        return key_bound(from_bytes(kind, raw) if isinstance(kind, _BOUNDED_TYPES) and raw is not None else None, upper)

    entries = [
        {
            "path": t.file.file_path,
            "lower": bound(t.file.lower_bounds, False),
            "upper": bound(t.file.upper_bounds, True),
        }
        for t in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()
    ]
    return {"base": str(snapshot.snapshot_id), "files": entries}


def merge(
    transaction: Transaction,
    changes: pa.Table | None,
    key: Sequence[str],
    properties: dict[str, str],
    rewrite: SparkRewrite | None = None,
) -> None:
    """Apply the batch's last change per key: replace each data file that holds a changed key by its rewrite
    without those rows (copy-on-write; a file left empty is dropped), then add the put rows. The rewrites are
    Spark's when the table is still at their base, else the worker's (see the module's docstring). Nothing is
    committed for an empty change set."""
    if changes is None or changes.num_rows == 0:
        return
    current = transaction.table_metadata.current_snapshot_id
    if rewrite is not None and rewrite.base == (None if current is None else str(current)):
        replaced = _spark_rewrites(transaction, rewrite)
    else:
        if rewrite is not None:
            log.info(
                "the mirror's snapshot is %s, Spark's rewrites are of %s: the changed keys' files are rewritten here",
                current,
                rewrite.base,
            )
        replaced = _worker_rewrites(transaction, changes, key)
    if replaced:
        with transaction.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
            for old, new in replaced:
                overwrite.delete_data_file(old)
                for data_file in new:
                    overwrite.append_data_file(data_file)
    puts = put_rows(changes)
    if puts.num_rows:
        transaction.append(puts, snapshot_properties=properties)


def _spark_rewrites(transaction: Transaction, rewrite: SparkRewrite) -> list[tuple[DataFile, list[DataFile]]]:
    """Each rewritten data file with its rewrite's data files (from their Parquet footers), refused unless the
    rewrite holds the file's rows less those Spark counted as changed (:func:`check_rewrite`)."""
    if not rewrite.rewritten:
        return []
    if transaction.table_metadata.name_mapping() is None:  # Spark's files carry no Iceberg field ids
        mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
        transaction.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
    metadata, io = transaction.table_metadata, transaction._table.io
    live = {task.file.file_path: task.file for task in transaction._scan().plan_files()}
    replaced = []
    for file in rewrite.rewritten:
        old = live.get(file.path)
        check_rewrite(file, None if old is None else old.record_count)
        assert old is not None
        new = list(_parquet_files_to_data_files(metadata, [f.uri for f in file.files], io))
        replaced.append((old, new))
    return replaced


def _worker_rewrites(
    transaction: Transaction, changes: pa.Table, key: Sequence[str]
) -> list[tuple[DataFile, list[DataFile]]]:
    """Each data file of the table as it is that holds a changed key, with its rewrite without those rows.
    Only files whose key statistics overlap the changed keys' ranges are read, one at a time; which rows go
    is an anti-join on the key columns."""
    keys = changes.select(list(key)).group_by(list(key)).aggregate([])
    metadata, io = transaction.table_metadata, transaction._table.io
    schema = metadata.schema()
    write_uuid, counter = uuid.uuid4(), itertools.count(0)
    replaced: list[tuple[DataFile, list[DataFile]]] = []
    for task in transaction._scan(row_filter=candidate_filter(keys, key)).plan_files():
        rows = ArrowScan(metadata, io, schema, AlwaysTrue()).to_table([task])
        wanted = keys.cast(pa.schema([rows.schema.field(k) for k in key]))
        kept = rows.join(wanted, keys=list(key), join_type="left anti").select(rows.column_names)
        if kept.num_rows < rows.num_rows:
            replaced.append((task.file, list(_dataframe_to_data_files(metadata, kept, io, write_uuid, counter))))
    return replaced


def restore(transaction: Transaction, table: Table, before: int | None, properties: dict[str, str], what: str) -> None:
    """Put the table's files back to those of snapshot ``before`` (None: no file), in ``transaction``: the
    state a replayed batch is merged into again. Files only the current state has are removed, files only
    ``before`` had are added back (they must still exist: snapshot expiry removes them)."""
    current = {t.file.file_path: t.file for t in table.scan().plan_files()}
    previous = {} if before is None else {t.file.file_path: t.file for t in table.scan(snapshot_id=before).plan_files()}
    gone = [path for path in previous if path not in current and not table.io.new_input(path).exists()]
    if gone:
        raise MergeOperationRefusedError(
            f"{what}: the table's state before it is gone ({len(gone)} of its data files were removed, e.g. by "
            f"snapshot expiry: {gone[0]}); nothing was replayed"
        )
    if current.keys() == previous.keys():
        return
    with transaction.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
        for path, data_file in current.items():
            if path not in previous:
                overwrite.delete_data_file(data_file)
        for path, data_file in previous.items():
            if path not in current:
                overwrite.append_data_file(data_file)
