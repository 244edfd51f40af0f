"""A mirror table's merge on Delta: a batch's change set applied in one Delta commit.

Spark computed the change set (the last change per key, ``spark_apps/kafka_batch_changes.py``) and rewrote the
table's files that hold a changed key without those rows (``spark_apps/kafka_batch_rewrite.py``, from the files
and key statistics :func:`rewrite_job` gives the job). When the table is still at the version they were made
from, the commit removes those files and adds their rewrites and the batch's put rows (the sink's ``_swap``: the
worker reads footers and the change set, never the table). When it moved since, the change set is instead
the source of one ``DeltaTable.merge`` on the table as it now is: a changed key's row is deleted when its
change deletes, updated when it puts, and a put of a key the table lacks is inserted. delta-rs prunes the
table's files by the change set's key range (``streamed_exec=False``: the change set, the batch's size, is in
memory anyway) and rewrites only the files that hold a changed key. Neither way writes deletion vectors, so
every Delta reader reads plain data files.

The commit carries the batch's app transaction (``txnAppId`` = the pipeline's app id, ``txnVersion`` =
the batch) and the batch's commit metadata, as an appending batch's does: a retry after a crash between
the Delta commit and the ledger's finds it and does not merge twice. A merge runs on the table's latest
version; a writer that commits while it runs makes delta-rs fail the commit (a conflict), and the caller
merges again on the table as it then is.

Replay and abort read the table's history: only a batch whose commit is the table's latest is taken back
(:func:`latest_merges`), and merged again only when no later commit changed the table's rows
(:func:`replay_merges`: a schema change a later plan committed changes none). A replay merges the
replayed change set on the current state in one commit, which is the state a restore to the version
before the batch followed by the merge would give, without a second commit in between: every key of
the change set is set to its final row (or removed) whatever it held, so merging a change set again on
its own result changes no row (``core.merge.applied`` is idempotent). An abort restores the version
before the batch (delta-rs ``restore``: one commit).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import DeltaError
from deltalake.transaction import AddAction, RemoveAction

from airflow_kafka_offsets.errors import MergeOperationRefusedError
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.object_storage.storage import DataFile, Storage
from airflow_kafka_offsets.sinks.base import ABORT, ATTEMPT, BATCH, OPERATION
from airflow_kafka_offsets.sinks.change_set import SparkRewrite, check_rewrite, key_bound, put_rows
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import DELETED

SOURCE = "s"
TARGET = "t"


def _column(alias: str, name: str) -> str:
    """A column in a delta-rs predicate, quoted: names keep their case and may hold any character."""
    quoted = name.replace('"', '""')
    return f'{alias}."{quoted}"'


def key_predicate(key: Sequence[str]) -> str:
    """The merge's join: every key column of the table equals the change set's."""
    return " AND ".join(f"{_column(TARGET, k)} = {_column(SOURCE, k)}" for k in key)


def conformed(changes: pa.Table, schema: pa.Schema) -> pa.Table:
    """The change set with the table's columns in its order and types, then ``_deleted``.

    A column the table has and the batch did not decode (the table evolved since) is null: the row a
    put leaves is then the batch's row, as Iceberg's overwrite of the changed keys leaves it."""
    columns = [
        changes.column(f.name).cast(f.type) if f.name in changes.column_names else pa.nulls(changes.num_rows, f.type)
        for f in schema
    ]
    fields = [*schema, pa.field(DELETED, pa.bool_())]
    return pa.Table.from_arrays([*columns, changes.column(DELETED)], schema=pa.schema(fields))


def rewrite_job(table: DeltaTable, location: str, key: Sequence[str]) -> dict[str, Any]:
    """The job's ``merge.rewrite`` (``spark_apps/kafka_batch_contract.py``): the table's data files at its
    current version, each with the first key column's min and max from its statistics (ints and strings; null:
    unknown). The log only: no data file is read."""
    actions = table.get_add_actions(flatten=True)
    names = actions.column_names

    def column(name: str) -> list[Any]:
        return list(actions.column(name).to_pylist()) if name in names else [None] * actions.num_rows

    paths, lows, highs = column("path"), column(f"min.{key[0]}"), column(f"max.{key[0]}")
    listed = [
        {"path": files.join(location, path), "lower": key_bound(low, False), "upper": key_bound(high, True)}
        for path, low, high in zip(paths, lows, highs, strict=True)
    ]
    return {"base": str(table.version()), "files": listed}


def file_stats(metadata: pq.FileMetaData, columns: Sequence[str]) -> str:
    """A Delta add action's ``stats`` for a Parquet file from its footer: its record count, and for each of
    ``columns`` that every row group has int or string statistics of, the min, max and null count (what the
    next batch's :func:`rewrite_job` and readers prune by)."""
    stats: dict[str, Any] = {"numRecords": metadata.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    names = metadata.schema.names
    for name in columns:
        if name not in names:
            continue
        index = names.index(name)
        groups = [metadata.row_group(i).column(index).statistics for i in range(metadata.num_row_groups)]
        if not groups or any(g is None or not g.has_min_max for g in groups):
            continue
        lows, highs = [g.min for g in groups], [g.max for g in groups]
        if all(key_bound(v, False) is not None for v in lows + highs):
            stats["minValues"][name], stats["maxValues"][name] = min(lows), max(highs)
            stats["nullCount"][name] = sum(g.null_count for g in groups)
    return json.dumps(stats)


PUTS_DIR = "_puts"  # a mirror batch's put rows, written by the commit beside Spark's rewrites


def swap(
    table: DeltaTable,
    location: str,
    storage: Storage,
    rewrite: SparkRewrite,
    changes: pa.Table,
    key: Sequence[str],
    staging_uri: str,
    properties: CommitProperties,
) -> None:
    """One Delta commit to the table at ``location`` (as the job's paths name it): the files Spark rewrote out,
    their rewrites and the batch's put rows (written here, to ``<staging_uri>/_puts/``) in, each rewrite checked
    to hold its file's rows less those Spark counted as changed
    (:func:`~airflow_kafka_offsets.sinks.change_set.check_rewrite`). Nothing is committed for tombstones only.

    ``properties`` should allow no retry (``max_commit_retries=0``): the commit must be the version right after
    Spark's base, since delta-rs would rebase it over another writer's append (which may hold a changed key)
    without a conflict."""
    live = table.get_add_actions(flatten=True)
    paths = live.column("path").to_pylist()
    records = dict(zip(paths, live.column("num_records").to_pylist(), strict=True))
    sizes = dict(zip(paths, live.column("size_bytes").to_pylist(), strict=True))
    now_ms = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = []
    for file in rewrite.rewritten:
        old = relative_path(location, file.path)
        check_rewrite(file, records.get(old))
        actions.append(RemoveAction(old, True, now_ms, sizes[old]))
        actions += [_added(storage, location, f, key) for f in file.files]
    puts = put_rows(conformed(changes, pa.schema(table.schema())))
    if puts.num_rows:
        directory = files.join(staging_uri, PUTS_DIR)
        fs, path = storage.filesystem(files.join(directory, "part-00000.parquet"))
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        pq.write_table(puts, path, filesystem=fs)
        actions += [_added(storage, location, f, key) for f in storage.parquet_files(directory)]
    if actions:
        table.create_write_transaction(actions, mode="append", schema=table.schema(), commit_properties=properties)


def _added(storage: Storage, location: str, file: DataFile, key: Sequence[str]) -> AddAction:
    """A mirror's new data file, with the statistics of its key columns (the next batch prunes by them)."""
    fs, path = storage.filesystem(file.uri)
    with fs.open_input_file(path) as handle:
        stats = file_stats(pq.ParquetFile(handle).metadata, key)
    return AddAction(relative_path(location, file.uri), file.size, {}, file.modified_ms, True, stats)


def relative_path(location: str, uri: str) -> str:
    """A file's path in the Delta log: relative to the table's ``location``."""
    return uri[len(location.rstrip("/")) + 1 :]


def merge(
    table: DeltaTable,
    changes: pa.Table,
    key: Sequence[str],
    metadata: Mapping[str, str],
    transactions: list[Transaction] | None,
) -> dict[str, Any]:
    """Apply the change set to ``table`` (as loaded) in one Delta commit carrying ``metadata`` and the
    app ``transactions``; returns delta-rs's metrics. delta-rs raises ``CommitFailedError`` when another
    writer committed since ``table`` was loaded in a way that conflicts with the merge."""
    deleted = _column(SOURCE, DELETED)
    merger = table.merge(
        conformed(changes, pa.schema(table.schema())),
        key_predicate(key),
        source_alias=SOURCE,
        target_alias=TARGET,
        streamed_exec=False,
        commit_properties=CommitProperties(custom_metadata=dict(metadata), app_transactions=transactions),
    )
    merger = merger.when_matched_delete(deleted)
    merger = merger.when_matched_update_all(f"NOT {deleted}", except_cols=[DELETED])
    merger = merger.when_not_matched_insert_all(f"NOT {deleted}", except_cols=[DELETED])
    return merger.execute()


def batch_merges(commits: Sequence[Mapping[str, Any]], batch_id: int) -> list[Mapping[str, Any]]:
    """The commits (of one pipeline, oldest first) that merged the batch and were not taken back since:
    those after its latest abort."""
    mine = [c for c in commits if c.get(BATCH) == str(batch_id)]
    aborts = [i for i, c in enumerate(mine) if c.get(OPERATION) == ABORT]
    return mine[aborts[-1] + 1 :] if aborts else mine


def held_attempt(commits: Sequence[Mapping[str, Any]], batch_id: int) -> str | None:
    """The attempt whose change set the table holds for the batch (None: it holds none)."""
    merges = batch_merges(commits, batch_id)
    return str(merges[-1].get(ATTEMPT) or "") if merges else None


def latest_merges(
    commits: Sequence[Mapping[str, Any]], batch_id: int, current: int, what: str, lost: str
) -> list[Mapping[str, Any]]:
    """The batch's merges still in the table, refused unless the last is the table's ``current`` version:
    a later commit (a later batch, another writer, a schema change) is built on the batch's state, and
    ``lost`` says what merging or restoring would do to it."""
    merges = batch_merges(commits, batch_id)
    if merges and int(merges[-1]["version"]) != current:
        raise MergeOperationRefusedError(
            f"{what}: the Delta table has commits after the batch's (version {current}, the batch's last "
            f"{merges[-1]['version']}); {lost}"
        )
    return merges


def replay_merges(
    commits: Sequence[Mapping[str, Any]],
    batch_id: int,
    current: int,
    files_at: Callable[[int], frozenset[str]],
    what: str,
) -> list[Mapping[str, Any]]:
    """The batch's merges still in the table, for a replay: refused when a commit after the batch's last merge
    changed the table's rows (added or removed data files: a later batch, another writer's rows, a compaction);
    merging the batch again would lose them. A commit that changes no row (the schema change a later plan
    commits, table properties) does not refuse it: the state before the batch, merged with the batch and then
    changed by those commits, is the current state merged with the batch, since a change set sets each of its
    keys whatever the row held. ``files_at(version)``: the table's data files at a version."""
    merges = batch_merges(commits, batch_id)
    if not merges or int(merges[-1]["version"]) == current:
        return merges
    last = int(merges[-1]["version"])
    if files_at(last) == files_at(current):
        return merges
    changed = next(v for v in range(last + 1, current + 1) if files_at(v) != files_at(v - 1))
    raise MergeOperationRefusedError(
        f"{what}: the Delta table has commits after the batch's that change its rows (version {changed}, after the "
        f"batch's {last}); merging it again would lose them. Only the latest commit of a mirror replays; commits "
        "that change no row (a schema change a later plan committed) do not count. Nothing was read or written"
    )


def restore(table: DeltaTable, version: int, metadata: Mapping[str, str], what: str) -> None:
    """Put the table back to ``version`` in one commit (delta-rs ``restore``) carrying ``metadata``.

    Refused when delta-rs cannot: the version's files removed by VACUUM, or another writer committing
    meanwhile (nothing changed then)."""
    try:
        table.restore(version, commit_properties=CommitProperties(custom_metadata=dict(metadata)))
    except DeltaError as exc:
        raise MergeOperationRefusedError(
            f"{what}: the Delta table could not be restored to version {version}, its state before the batch "
            f"({exc}); nothing was taken back"
        ) from exc
