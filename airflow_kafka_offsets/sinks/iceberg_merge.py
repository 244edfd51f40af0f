"""A mirror table's merge: a batch's change set applied to an Iceberg table in one copy-on-write commit.

Spark computed the change set (the last change per key, ``spark_apps/kafka_batch_changes.py``); here
it is applied inside the caller's table transaction (for the ledger's catalog: with the catalog row
locked, in the ledger's transaction). PyIceberg's overwrite with a filter on the changed keys
deletes their current rows and adds the batch's rows: data files whose column statistics (key
min/max, or their partition) exclude every changed key are not read; a file that may hold one is
read, and rewritten without the changed keys' rows when it holds any. No equality or position
deletes are written: every reader sees plain data files.

The change set is the batch's size (one row per changed key), so the worker holds at most it and
one affected data file at a time, never the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import And, BooleanExpression, EqualTo, GreaterThanOrEqual, In, LessThanOrEqual, Or
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
_IN: Any = In
_EQUAL: Any = EqualTo
_AT_LEAST: Any = GreaterThanOrEqual
_AT_MOST: Any = LessThanOrEqual
# PyIceberg's metrics evaluators compare each value of an IN of at most this many values with a data file's
# key bounds (pyiceberg.expressions.visitors.IN_PREDICATE_LIMIT); a larger IN prunes no file, a range does.
IN_PRUNED_MAX = 200
# A larger change set's keys are cut into at most this many ranges, at their widest gaps: the files outside
# every range are not read (changes to recent rows and a few old ones need more than one range).
KEY_RANGES = 16


def key_ranges(values: Sequence[Any], most: int = KEY_RANGES) -> list[Sequence[Any]]:
    """Sorted distinct ``values`` cut at their ``most - 1`` widest gaps (numbers; other types: one range)."""
    if len(values) < 2 or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [values]
    gaps = sorted(range(1, len(values)), key=lambda i: values[i] - values[i - 1], reverse=True)[: most - 1]
    cuts = [0, *sorted(i for i in gaps if values[i] - values[i - 1] > 1), len(values)]
    return [values[start:end] for start, end in pairwise(cuts)]


def _within(column: str, values: Sequence[Any]) -> BooleanExpression:
    """``column`` is one of ``values`` (sorted), with their range: a file outside it is not read."""
    bounds: BooleanExpression = And(_AT_LEAST(column, values[0]), _AT_MOST(column, values[-1]))
    return And(_IN(column, set(values)), bounds) if len(values) > 1 else _EQUAL(column, values[0])


def key_filter(keys: pa.Table, key: Sequence[str]) -> BooleanExpression:
    """Rows whose key is one of ``keys`` (distinct key tuples, one column per key column)."""
    if len(key) == 1:
        values = sorted(set(keys.column(key[0]).to_pylist()))
        if len(values) <= IN_PRUNED_MAX:
            single: BooleanExpression = _IN(key[0], set(values))
            return single
        return _balanced_or([_within(key[0], part) for part in key_ranges(values)])
    rows: list[dict[str, Any]] = keys.to_pylist()
    terms: list[BooleanExpression] = []
    for row in rows:
        term: BooleanExpression = _EQUAL(key[0], row[key[0]])
        for column in key[1:]:
            term = And(term, _EQUAL(column, row[column]))
        terms.append(term)
    return _balanced_or(terms)


def merge(transaction: Transaction, changes: pa.Table | None, key: Sequence[str], properties: dict[str, str]) -> None:
    """Apply the batch's last change per key: delete every changed key's current row, add the put rows.

    Nothing is committed for an empty change set (a batch of tombstones only)."""
    if changes is None or changes.num_rows == 0:
        return
    keys = changes.select(list(key)).group_by(list(key)).aggregate([])
    transaction.overwrite(put_rows(changes), key_filter(keys, key), snapshot_properties=properties)


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
