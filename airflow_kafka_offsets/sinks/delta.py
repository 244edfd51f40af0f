"""Delta Lake tables, committed with Delta's idempotent transaction identifiers.

Spark writes plain Parquet files into the table's directory (no Delta jars on the cluster, so
any Spark 4 works); the commit step adds them to the Delta log with delta-rs, in one Delta commit
carrying ``txnAppId`` = ``airflow-kafka-offsets-<pipeline uid>`` and ``txnVersion`` = the batch number, plus the
pipeline, batch, epoch, attempt and offset ranges in the commit's metadata.

The Delta commit runs while the ledger's transaction holds the batch's row, just before the
ledger commits. A crash between the two leaves the batch in the table and planned in the ledger;
the next commit finds the batch's app transaction in the table and commits the ledger alone (no
second Spark run, no second Delta commit), and an abort removes the batch's files from the table
in a new Delta commit. Only one run commits a pipeline's batch at a time (the ledger's row lock),
so the log's put-if-absent is needed only against other writers of the same table.

Layout: ``<output_root>/<table>/batch=<N>/<attempt>/part-*.parquet`` beside ``_delta_log/``.

Merge mode (a ``MergeSpec``: the table mirrors a source table): the attempt's change set
(``<attempt>/_changes/``, the last change per key, computed by Spark) is applied in one commit carrying the
same app transaction and metadata (:mod:`airflow_kafka_offsets.sinks.delta_merge`): Spark's rewrites of the
files holding a changed key (``<attempt>/_rewrites/``) in place of those files, with the put rows
(``<attempt>/_puts/``); or, when the table moved since Spark's rewrites, one delta-rs MERGE, whose files are
delta-rs's, at the table's root. An abort
restores the version before the batch, a replay merges again, both only when the batch's commit is the
table's latest.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from airflow_kafka_offsets.core.merge import MergeSpec
from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec, batch_directory
from airflow_kafka_offsets.errors import OutputLocationError, SchemaEvolutionError
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.sinks import delta_merge
from airflow_kafka_offsets.sinks.base import (
    ABORT,
    ATTEMPT,
    BATCH,
    OPERATION,
    PIPELINE_UID,
    LedgerStatements,
    Publication,
)
from airflow_kafka_offsets.sinks.change_set import read_changes, spark_rewrite
from airflow_kafka_offsets.sinks.delta_merge import relative_path
from airflow_kafka_offsets.sinks.schema import table_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import CHANGES_DIR, DAY_COLUMN

COMMIT_TRIES = 5


def app_id(pipeline_uid: str) -> str:
    """Delta's ``txnAppId`` of a pipeline: its ledger identity, so a ledger started over is a new writer."""
    return f"airflow-kafka-offsets-{pipeline_uid}"


class DeltaSink:
    """Batches as Delta commits of the table at ``<output_root>/<table>``."""

    def __init__(
        self,
        output_root: str,
        table: str,
        partition_by: str | None = None,
        storage: files.Storage | None = None,
        merge: MergeSpec | None = None,
    ) -> None:
        self.location = files.join(files.location_uri(output_root), table)
        self.table_name = table
        self.partition_columns = [DAY_COLUMN] if partition_by == "day" else []
        self.storage = storage or files.Storage()
        self._options = self.storage.delta_storage_options()
        self.merge = merge  # merge mode: the table mirrors a source table (core/merge.py)

    def _schema(self, decode: DecodeSpec | None) -> pa.Schema:
        schema = table_schema(decode, self.merge)
        return schema.append(pa.field(DAY_COLUMN, pa.date32())) if self.partition_columns else schema

    def table(self) -> DeltaTable:
        return DeltaTable(self.location, storage_options=self._options)

    def describe(self) -> dict[str, Any]:
        return {"format": "delta", "location": self.location, "table": self.table_name}

    def check_writable(self, decode: DecodeSpec | None) -> None:
        """Create the table, or add the fields ``decode`` adds; refuse any other difference."""
        wanted = self._schema(decode)
        try:
            table = self.table()
        except TableNotFoundError:
            DeltaTable.create(
                self.location,
                schema=wanted,
                mode="ignore",
                name=self.table_name,
                storage_options=self._options,
                partition_by=self.partition_columns or None,
            )
            return
        if table.metadata().partition_columns != self.partition_columns:
            raise SchemaEvolutionError(
                f"Delta table {self.location} is partitioned by {table.metadata().partition_columns or 'nothing'}, "
                f"this pipeline by {self.partition_columns or 'nothing'}. Nothing was planned"
            )
        current = pa.schema(table.schema())
        missing = [f.name for f in current if f.name not in wanted.names]
        changed = [f.name for f in current if f.name in wanted.names and not _compatible(f, wanted.field(f.name))]
        if missing or changed:
            raise SchemaEvolutionError(
                f"Delta table {self.location}: this pipeline's output schema is not the table's plus new columns "
                f"(dropped: {missing or 'none'}; changed: {changed or 'none'}); only adding columns evolves a "
                "table. Nothing was planned"
            )
        if any(not f.type.equals(current.field(f.name).type) for f in wanted if f.name in current.names) or (
            set(wanted.names) - set(current.names)
        ):  # new columns or new fields: a commit of no rows whose schema Delta merges into the table's
            write_deltalake(
                self.location,
                wanted.empty_table(),
                mode="append",
                schema_mode="merge",
                partition_by=self.partition_columns or None,
                storage_options=self._options,
            )

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        return self.location

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        return files.join(self.location, batch_directory(batch_id), attempt_id)

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        return self.storage.read_report(staging_uri)

    def _commits(self, table: DeltaTable, pipeline_uid: str) -> list[dict[str, Any]]:
        """This pipeline's commits in the table's history, oldest first."""
        return [c for c in reversed(table.history()) if c.get(PIPELINE_UID) == pipeline_uid]

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        table = self.table()
        version = table.transaction_version(app_id(pipeline_uid))
        if version is None or version < plan.batch_id:
            return None
        if self.merge is not None:  # the batch's merge, unless an abort took it back
            return delta_merge.held_attempt(self._commits(table, pipeline_uid), plan.batch_id)
        current = {_attempt_of(path) for path in self._batch_files(table, plan.batch_id)}
        for commit in reversed(self._commits(table, pipeline_uid)):
            if commit.get(BATCH) == str(plan.batch_id) and commit.get(ATTEMPT) in current:
                return str(commit[ATTEMPT])
        return None

    def _batch_files(self, table: DeltaTable, batch_id: int) -> list[str]:
        prefix = batch_directory(batch_id) + "/"
        paths = table.get_add_actions(flatten=True).column("path").to_pylist()
        return [p for p in paths if p.startswith(prefix)]

    def publish(self, tx: LedgerStatements, publication: Publication) -> None:
        """One Delta commit: the attempt's files in (a replay also takes the batch's current files out).

        Delta's log is its own transaction: ``tx`` is not used. A mirror: one merge of the change set."""
        if self.merge is not None:
            self._merge(publication)
        else:
            self._commit(publication)

    def _merge(self, publication: Publication) -> None:
        """Merge the attempt's change set in one Delta commit, unless the table already holds it (a commit:
        the batch's app transaction; a replay: this attempt's commit); retried on the table as it now is
        when another writer's commit conflicts with it. An empty change set (tombstones only) commits
        nothing."""
        assert self.merge is not None
        if publication.staging_uri is None:
            return  # a batch without records changes nothing
        found = self.storage.parquet_files(files.join(publication.staging_uri, CHANGES_DIR))
        changes = read_changes(self.storage, [f.uri for f in found])
        if changes is None or changes.num_rows == 0:
            return
        plan = publication.plan
        transactions = None if publication.replay else [Transaction(app_id(publication.pipeline_uid), plan.batch_id)]
        report = self.read_report(publication.staging_uri)
        rewrite = None if publication.replay else spark_rewrite(self.storage, publication.staging_uri, report)
        for _ in range(COMMIT_TRIES):
            table = self.table()
            commits = self._commits(table, publication.pipeline_uid)
            if self._holds(table, commits, publication):
                return
            if publication.replay:
                self._replay_merges(table, commits, plan)
            try:
                if rewrite is not None and rewrite.base == str(table.version()):
                    properties = CommitProperties(
                        publication.commit_properties(), max_commit_retries=0, app_transactions=transactions
                    )
                    staging, key = publication.staging_uri, self.merge.key
                    delta_merge.swap(table, self.location, self.storage, rewrite, changes, key, staging, properties)
                else:
                    delta_merge.merge(table, changes, self.merge.key, publication.commit_properties(), transactions)
                return
            except CommitFailedError:
                continue  # another writer committed meanwhile (or the answer was lost): look at the table again
        raise OutputLocationError(
            f"Delta table {self.location}: {COMMIT_TRIES} merges of batch {plan.batch_id} lost to concurrent "
            "writers; nothing of it was merged, the batch stays as it was: run the step again"
        )

    def rewrite_base(self) -> dict[str, Any] | None:
        """A mirror's job ``merge.rewrite``: the table's data files for Spark to rewrite those holding a changed
        key (:func:`~airflow_kafka_offsets.sinks.delta_merge.rewrite_job`); None for an appending table."""
        if self.merge is None:
            return None
        return delta_merge.rewrite_job(self.table(), self.location, self.merge.key)

    def check_replay(self, pipeline_uid: str, plan: BatchPlan) -> None:
        """A mirror's replay, refused before Spark reads the batch again when its merge would be (an appending
        batch's replay swaps its own files: nothing later refuses it)."""
        if self.merge is not None:
            table = self.table()
            self._replay_merges(table, self._commits(table, pipeline_uid), plan)

    def _replay_merges(self, table: DeltaTable, commits: list[dict[str, Any]], plan: BatchPlan) -> None:
        delta_merge.replay_merges(
            commits,
            plan.batch_id,
            table.version(),
            self._files_at,
            f"replay of batch {plan.batch_id} of {plan.pipeline!r} into a mirror table",
        )

    def _files_at(self, version: int) -> frozenset[str]:
        """The table's data files at ``version``."""
        return frozenset(DeltaTable(self.location, version=version, storage_options=self._options).file_uris())

    def _holds(self, table: DeltaTable, commits: list[dict[str, Any]], publication: Publication) -> bool:
        """The table already holds what ``publication`` would merge: a commit's app transaction (not taken
        back by an abort), or a replay's own commit."""
        batch = publication.plan.batch_id
        if publication.replay:
            return any(c.get(ATTEMPT) == publication.attempt_id for c in delta_merge.batch_merges(commits, batch))
        version = table.transaction_version(app_id(publication.pipeline_uid))
        return version is not None and version >= batch and delta_merge.held_attempt(commits, batch) is not None

    def _commit(self, publication: Publication) -> None:
        plan = publication.plan
        if publication.staging_uri is None:
            return  # a batch without records changes nothing a reader could see
        table = self.table()
        now_ms = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = [
            AddAction(
                relative_path(self.location, f.uri),
                f.size,
                _partition_values(relative_path(self.location, f.uri)) if self.partition_columns else {},
                f.modified_ms,
                True,
                json.dumps({"numRecords": f.records}),
            )
            for f in self.storage.parquet_files(publication.staging_uri)
        ]
        transactions = None
        if publication.replay:
            actions += [RemoveAction(path, True, now_ms) for path in self._batch_files(table, plan.batch_id)]
        else:
            transactions = [Transaction(app_id(publication.pipeline_uid), plan.batch_id)]
        try:
            table.create_write_transaction(
                actions,
                mode="append",
                schema=table.schema(),
                partition_by=self.partition_columns or None,
                commit_properties=CommitProperties(
                    custom_metadata=publication.commit_properties(), app_transactions=transactions
                ),
            )
        except CommitFailedError as exc:
            if self._landed(publication):
                return  # the log entry was written, its answer lost: the client asked again and met it
            raise OutputLocationError(
                f"Delta table {self.location}: the commit of batch {plan.batch_id} failed ({exc}) and the table "
                "does not hold it: nothing of it was committed, the batch stays planned; run the step again"
            ) from exc

    def _landed(self, publication: Publication) -> bool:
        """The table's log holds this attempt's commit of the batch (after a lost answer, a client's second PUT
        of the same log entry fails as a concurrent transaction: its own)."""
        batch, attempt = str(publication.plan.batch_id), publication.attempt_id
        commits = self._commits(self.table(), publication.pipeline_uid)
        return any(c.get(BATCH) == batch and c.get(ATTEMPT) == attempt for c in commits)

    def commit_once(self, publication: Publication, files_uri: str) -> int:
        """A sink of many tables: this table's part of a batch (the Parquet files under ``files_uri``)
        committed once, the table created if it is new; returns the version holding the batch.

        The files are copied under the table's root first (delta-rs reads only paths there). A batch
        whose app transaction the table already holds (a commit that crashed before the ledger's) is
        not committed again.
        """
        plan = publication.plan
        assert publication.attempt_id is not None  # only attempts with records reach a table
        try:
            table = self.table()
        except TableNotFoundError:
            self.check_writable(publication.decode)
            table = self.table()
        landed = table.transaction_version(app_id(publication.pipeline_uid))
        if publication.replay or landed is None or landed < plan.batch_id:
            target = self.staging_uri(plan.pipeline, plan.batch_id, publication.attempt_id)
            self.storage.copy_tree(files_uri, target)
            self._commit(replace(publication, staging_uri=target))
            table = self.table()
        for commit in self._commits(table, publication.pipeline_uid)[::-1]:
            if commit.get(BATCH) == str(plan.batch_id) and commit.get(ATTEMPT) == publication.attempt_id:
                return int(commit["version"])
        raise OutputLocationError(
            f"Delta table {self.location}: batch {plan.batch_id} of attempt {publication.attempt_id} is not in its "
            "log after its commit (another writer removed it?); nothing was committed in the ledger"
        )

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Remove a batch that a crash left in the table but not in the ledger, in a new Delta commit."""
        if self.merge is not None:
            return self._withdraw_merge(pipeline_uid, plan)
        table = self.table()
        paths = self._batch_files(table, plan.batch_id)
        if paths:
            now_ms = int(time.time() * 1000)
            table.create_write_transaction(
                [RemoveAction(path, True, now_ms) for path in paths],
                mode="append",
                schema=table.schema(),
                partition_by=self.partition_columns or None,
                commit_properties=CommitProperties(custom_metadata=_abort_metadata(pipeline_uid, plan)),
            )
            return files.join(self.location, *paths[0].split("/")[:2])
        return None

    def _withdraw_merge(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Take back a mirror's merge that a crash left in the table: restore the version before it, in one
        commit, only when the merge is the table's latest commit (a later one is built on its state)."""
        table = self.table()
        what = f"abort of batch {plan.batch_id} of {plan.pipeline!r}, merged into a mirror table by a crashed commit"
        merges = delta_merge.latest_merges(
            self._commits(table, pipeline_uid),
            plan.batch_id,
            table.version(),
            what,
            "restoring the version before it would lose them. The batch stays planned: commit it instead (the "
            "table holds its merge; the commit records it once)",
        )
        if not merges:
            return None
        delta_merge.restore(table, int(merges[0]["version"]) - 1, _abort_metadata(pipeline_uid, plan), what)
        attempt = merges[-1].get(ATTEMPT)
        return self.staging_uri(plan.pipeline, plan.batch_id, str(attempt)) if attempt else None

    def in_use(self, staging_uri: str) -> bool:
        attempt_id = staging_uri.rstrip("/").rsplit("/", 1)[-1]
        return any(c.get(ATTEMPT) == attempt_id for c in self.table().history())

    def discard_attempt(self, staging_uri: str) -> None:
        """Files the table's log references go with Delta's VACUUM (after its retention), not here."""
        if self.storage.exists(staging_uri) and not self.in_use(staging_uri):
            self.storage.remove_tree(staging_uri)

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        return self.storage.batch_attempts(self.location)

    def leftover_output(self, output_uri: str) -> str | None:
        return None  # the output is the table: an aborted batch has nothing of its own there

    def remove_output(self, output_uri: str) -> bool:
        return False  # an aborted batch's files leave the table by withdraw

    def exists(self, uri: str) -> bool:
        return self.storage.exists(uri)


def _abort_metadata(pipeline_uid: str, plan: BatchPlan) -> dict[str, str]:
    """What an abort's commit says: the batch it took back (no attempt: it adds none)."""
    return {PIPELINE_UID: pipeline_uid, BATCH: str(plan.batch_id), OPERATION: ABORT, ATTEMPT: ""}


def _partition_values(relative: str) -> dict[str, str | None]:
    """Spark's ``column=value`` directories between the attempt and the file."""
    values: dict[str, str | None] = {}
    for segment in relative.split("/")[2:-1]:
        key, _, value = segment.partition("=")
        values[key] = value
    return values


def _attempt_of(path: str) -> str:
    return path.split("/")[1] if path.count("/") >= 2 else ""


def _compatible(current: pa.Field, wanted: pa.Field) -> bool:
    """Same type, or a struct the wanted one only adds fields to."""
    if pa.types.is_struct(current.type) and pa.types.is_struct(wanted.type):
        names = [f.name for f in wanted.type]
        return all(f.name in names and _compatible(f, wanted.type.field(f.name)) for f in current.type)
    return bool(current.type.equals(wanted.type))
