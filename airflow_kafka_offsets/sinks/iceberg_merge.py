"""A mirror table's merge: a batch's change set applied to an Iceberg table in one copy-on-write commit.

Spark computed the change set (the last change per key, ``spark_apps/kafka_batch_changes.py``); here
it is applied inside the caller's table transaction (for the ledger's catalog: with the catalog row
locked, in the ledger's transaction): each data file that holds a changed key is rewritten without the
changed keys' rows, then the batch's rows are added. Only the data files whose key statistics overlap the
changed keys' ranges are read. No equality or position deletes are written: every reader sees plain data
files.

The change set is the batch's size (one row per changed key), so the worker holds at most it and
one affected data file at a time, never the table.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThanOrEqual, Or
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, Transaction

from airflow_kafka_offsets.errors import MergeOperationRefusedError
from airflow_kafka_offsets.sinks.change_set import put_rows


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


def merge(transaction: Transaction, changes: pa.Table | None, key: Sequence[str], properties: dict[str, str]) -> None:
    """Apply the batch's last change per key: rewrite each data file that holds a changed key without its
    rows (copy-on-write; a file left empty is dropped), then add the put rows.

    Only files whose key statistics overlap the changed keys' ranges are read, one at a time; which rows go
    is an anti-join on the key columns. Nothing is committed for an empty change set."""
    if changes is None or changes.num_rows == 0:
        return
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
    if replaced:
        with transaction.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
            for old, new in replaced:
                overwrite.delete_data_file(old)
                for data_file in new:
                    overwrite.append_data_file(data_file)
    puts = put_rows(changes)
    if puts.num_rows:
        transaction.append(puts, snapshot_properties=properties)


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
