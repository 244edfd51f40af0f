"""Apache Iceberg tables whose catalog lives in the ledger's database, committed in the ledger's transaction.

The catalog is the SQL (JDBC) catalog layout that PyIceberg's SqlCatalog, Spark's JdbcCatalog
and Trino share: one row per table in ``iceberg_tables`` holds the current metadata location,
and a commit is a compare-and-set of that row. Because the row is in the ledger's database, the
commit step locks it, writes the new metadata file and swaps the pointer with the same
PostgreSQL transaction that advances the pipeline's cursor: the batch is in the table if and only
if the ledger says it is committed, for every reader, with nothing to recover after a crash.

Spark writes plain Parquet files (no Iceberg runtime on the cluster, so any Spark 4 works); the
commit adds them with PyIceberg (``add_files``, which reads their footers for statistics). Every
snapshot's summary names the pipeline, batch, epoch, attempt and offset ranges.

With ``catalog_conn_id`` the catalog is outside the ledger's database: a SQL catalog in another
PostgreSQL database, or an Iceberg REST catalog (PyIceberg's ``RestCatalog``). The commit then runs
just before the ledger's, asserts the table's current snapshot (PyIceberg's commit requirement), is
retried on the table as it now is when another writer committed first, and is idempotent (a
snapshot whose summary names this pipeline's batch is not added twice); an abort takes a batch that
a crash left in the table back out in a new snapshot. Both catalog kinds take the same path.

Layout: ``<table location>/data/batch=<N>/<attempt>/part-*.parquet``; readers follow the table.

Merge mode (a ``MergeSpec``: the table mirrors a source table): the attempt's change set
(``<attempt>/_changes/``, the last change per key, computed by Spark) is applied in the same commit (the
locked one in the ledger's catalog, the idempotent one in another) by
:mod:`airflow_kafka_offsets.sinks.iceberg_merge`: a copy-on-write overwrite that rewrites only the data files
whose key statistics may hold a changed key. In another catalog an abort of a merge a crash left there puts
back the state before it, only while it is the table's latest commit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    OAuthError,
    UnauthorizedError,
)
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table, Transaction, _parquet_files_to_data_files
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.transforms import DayTransform
from requests import ConnectionError as RequestsConnectionError
from requests import Response, Session, Timeout

from airflow_kafka_offsets.core.catalogs import RestCatalogConfig
from airflow_kafka_offsets.core.merge import MergeSpec
from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec, batch_directory
from airflow_kafka_offsets.core.output_tables import TABLE_UUID, RecordedTable, table_change_refusal
from airflow_kafka_offsets.errors import (
    CatalogAuthenticationError,
    CatalogUnavailableError,
    MergeOperationRefusedError,
    OutputLocationError,
    OutputTableChangedError,
    SchemaEvolutionError,
)
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.object_storage.access import is_object_store
from airflow_kafka_offsets.sinks import iceberg_merge
from airflow_kafka_offsets.sinks.base import LedgerStatements, Publication
from airflow_kafka_offsets.sinks.change_set import read_changes, spark_rewrite
from airflow_kafka_offsets.sinks.schema import table_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import CHANGES_DIR

PIPELINE_UID = "kafka-offsets.pipeline-uid"
BATCH = "kafka-offsets.batch"
ATTEMPT = "kafka-offsets.attempt"
OPERATION = "kafka-offsets.operation"
COMMIT_TRIES = 5
# What a refused replay or abort of a mirror's batch says to do instead.
REPLAY_ONLY_LATEST = "Only the latest commit of a mirror replays"
ABORT_KEEPS_MERGE = "The batch stays planned: commit it instead (the table holds its merge; the commit records it once)"


class LedgerCatalog(SqlCatalog):
    """A SqlCatalog whose commits, while bound to an open ledger transaction, run inside it."""

    _bound: Any = None

    @contextmanager
    def bound(self, tx: LedgerStatements) -> Iterator[None]:
        self._bound = tx
        try:
            yield
        finally:
            self._bound = None

    def load_locked(self, identifier: tuple[str, ...]) -> Table:
        """The table as of its locked catalog row: no other writer commits until the ledger's transaction ends."""
        namespace, name = Catalog.namespace_to_string(identifier[:-1]), identifier[-1]
        row = self._bound.fetchone(
            "SELECT metadata_location FROM iceberg_tables"
            " WHERE catalog_name = %s AND table_namespace = %s AND table_name = %s FOR UPDATE",
            (self.name, namespace, name),
        )
        if row is None:
            raise OutputLocationError(f"Iceberg table {'.'.join(identifier)} is not in catalog {self.name!r}")
        metadata_location = str(row[0])
        io = self._load_file_io(location=metadata_location)
        metadata = FromInputFile.table_metadata(io.new_input(metadata_location))
        return Table(identifier, metadata, metadata_location, self._load_file_io(metadata.properties), self)

    def exists_locked(self, identifier: tuple[str, ...]) -> bool:
        """The table has a catalog row (seen by the ledger's transaction, which may have created it)."""
        namespace, name = Catalog.namespace_to_string(identifier[:-1]), identifier[-1]
        return (
            self._bound.fetchone(
                "SELECT 1 FROM iceberg_tables WHERE catalog_name = %s AND table_namespace = %s AND table_name = %s",
                (self.name, namespace, name),
            )
            is not None
        )

    def create_locked(self, identifier: tuple[str, ...], schema: pa.Schema) -> None:
        """Create a table whose catalog row appears with the ledger's commit (as SqlCatalog.create_table
        does, but inserting the row in the bound transaction): a reader sees the table and the batch's
        first snapshot together, or neither."""
        namespace, name = Catalog.namespace_to_string(identifier[:-1]), identifier[-1]
        iceberg_schema = self._convert_schema_if_needed(schema, 2)
        location = self._resolve_table_location(None, namespace, name)
        metadata_location = load_location_provider(location, {}).new_table_metadata_file_location()
        metadata = new_table_metadata(
            location=location,
            schema=iceberg_schema,
            partition_spec=UNPARTITIONED_PARTITION_SPEC,
            sort_order=UNSORTED_SORT_ORDER,
        )
        self._write_metadata(metadata, load_file_io(self.properties, metadata_location), metadata_location)
        self._bound.execute(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location)"
            " VALUES (%s, %s, %s, %s)",
            (self.name, namespace, name, metadata_location),
        )

    def commit_table(
        self, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        if self._bound is None:
            return super().commit_table(table, requirements, updates)
        identifier = table.name()
        current = self.load_locked(identifier)
        staged = self._update_and_stage_table(current, identifier, requirements, updates)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        swapped = self._bound.execute(
            "UPDATE iceberg_tables SET metadata_location = %s, previous_metadata_location = %s"
            " WHERE catalog_name = %s AND table_namespace = %s AND table_name = %s AND metadata_location = %s",
            (
                staged.metadata_location,
                current.metadata_location,
                self.name,
                Catalog.namespace_to_string(identifier[:-1]),
                identifier[-1],
                current.metadata_location,
            ),
        ).rowcount
        if swapped != 1:  # the row is locked, so only a broken catalog gets here
            raise CommitFailedException(f"Iceberg table {'.'.join(identifier)} moved during the ledger's commit")
        return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)  # type: ignore[call-arg]


class BoundedRestCatalog(RestCatalog):
    """PyIceberg's RestCatalog with every request bounded by the connection's timeout (PyIceberg sets none:
    a catalog that takes the connection and never answers would hold the worker forever), and a catalog
    that does not answer or refuses the connection reported as :class:`CatalogUnavailableError`."""

    def __init__(self, config: RestCatalogConfig, **properties: str) -> None:
        self._config = config  # set first: the parent's constructor opens sessions (/v1/config, a token)
        super().__init__(config.conn_id, **properties)

    def _create_session(self) -> Session:
        return self._bounded(super()._create_session())

    def _create_legacy_oauth2_auth_manager(self, session: Session) -> Any:
        """The OAuth2 client-credentials manager fetches its token with the session being built, before
        ``_create_session`` returns it: bound the session first."""
        return super()._create_legacy_oauth2_auth_manager(self._bounded(session))

    def _bounded(self, session: Session) -> Session:
        """``session`` with every request bounded by the timeout and a silence reported as the catalog's."""
        if getattr(session, "_kafka_offsets_bounded", False):
            return session
        unbounded = session.request
        config = self._config

        def request(method: str, url: str, **kwargs: Any) -> Response:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = config.timeout_s
            try:
                return unbounded(method, url, **kwargs)
            except (RequestsConnectionError, Timeout) as exc:
                request = f"{method} {urlsplit(url).path}"
                # requests' ConnectTimeout is both: the catalog did not take the connection in time
                silent = isinstance(exc, Timeout)
                what = (
                    f"did not answer {request} within {config.timeout_s:g}s"
                    if silent
                    else f"refused or dropped the connection of {request}"
                )
                raise CatalogUnavailableError(
                    f"Iceberg REST catalog {config.uri} (connection {config.conn_id!r}) {what} "
                    f"({type(exc).__name__}). Nothing of this step was recorded in the ledger; a table commit "
                    "whose answer was lost is found in the table's history by the retry, never added twice"
                ) from exc

        setattr(session, "request", request)  # noqa: B010 - the instance's own method, for every verb
        setattr(session, "_kafka_offsets_bounded", True)  # noqa: B010
        return session


def rest_catalog(config: RestCatalogConfig, storage_properties: dict[str, str] | None = None) -> RestCatalog:
    """PyIceberg's RestCatalog for a REST catalog connection; ``storage_properties`` (the object storage
    connection's) fill in what the connection does not say. Refused credentials are a
    :class:`CatalogAuthenticationError` (a retry cannot fix them)."""
    properties = {**(storage_properties or {}), **config.properties}
    try:
        return BoundedRestCatalog(config, **properties)
    except (OAuthError, UnauthorizedError, ForbiddenError) as exc:
        raise CatalogAuthenticationError(
            f"Iceberg REST catalog {config.uri} (connection {config.conn_id!r}) refused the connection's "
            f"credentials: {exc}. Nothing was read or written"
        ) from exc


def _plain(kind: pa.DataType) -> pa.DataType:
    """Iceberg reads strings, binaries and lists back as Arrow's large types: compare them as the plain ones."""
    if pa.types.is_large_string(kind):
        return pa.string()
    if pa.types.is_large_binary(kind):
        return pa.binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(pa.field("element", _plain(kind.value_type)))
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), _plain(kind.item_type))
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain(f.type)) for f in kind])
    return kind


def _evolution_problems(current: pa.Schema, wanted: pa.Schema, path: str = "") -> list[str]:
    """What in ``current`` the wanted schema changes other than by adding fields."""
    problems = []
    for current_field in current:
        name = f"{path}{current_field.name}"
        if current_field.name not in wanted.names:
            problems.append(f"{name} would be dropped")
            continue
        wanted_field = wanted.field(current_field.name)
        if pa.types.is_struct(current_field.type) and pa.types.is_struct(wanted_field.type):
            problems += _evolution_problems(
                pa.schema(list(current_field.type)), pa.schema(list(wanted_field.type)), f"{name}."
            )
        elif not _plain(current_field.type).equals(_plain(wanted_field.type)):
            problems.append(f"{name} would change from {current_field.type} to {wanted_field.type}")
    return problems


def _column_names(schema: pa.Schema, path: str = "") -> set[str]:
    """Every column's dotted name, struct fields included."""
    names = set()
    for field in schema:
        names.add(f"{path}{field.name}")
        if pa.types.is_struct(field.type):
            names |= _column_names(pa.schema(list(field.type)), f"{path}{field.name}.")
    return names


def _dropped_columns(earlier: list[pa.Schema], current: pa.Schema, wanted: pa.Schema) -> list[str]:
    """Columns the pipeline writes that an earlier schema of the table had and the current one lacks: someone
    else dropped them (a pipeline only adds columns)."""
    had = set().union(*(_column_names(schema) for schema in earlier))
    return sorted((_column_names(wanted) - _column_names(current)) & had)


class IcebergSink:
    """Batches as Iceberg snapshots of ``table`` (``namespace.name``) in catalog ``catalog_name``;
    new tables get their location under ``warehouse``."""

    def __init__(
        self,
        warehouse: str,
        table: str,
        catalog_uri: str | None,
        catalog_name: str,
        partition_by: str | None = None,
        storage: files.Storage | None = None,
        transactional: bool = True,
        catalog: Catalog | None = None,
        staging_root: str | None = None,
        rest: RestCatalogConfig | None = None,
        merge: MergeSpec | None = None,
    ) -> None:
        """``rest``: the tables are in that REST catalog (``catalog_uri`` is then unused)."""
        if not catalog_uri and rest is None:
            raise OutputLocationError(
                "the Iceberg sink keeps its catalog in the ledger's database, but this ledger has no catalog URI "
                "(open the ledger through LedgerHook, or pass Ledger(catalog_uri=...))"
            )
        self.warehouse = files.location_uri(warehouse)
        self.identifier = tuple(table.split("."))
        self.table_name = table
        self._catalog_uri = catalog_uri
        self.catalog_name = catalog_name
        self.partition_by = partition_by
        self.storage = storage or files.Storage()
        self.transactional = transactional and rest is None  # the catalog is in the ledger's database
        self._rest = rest
        self._catalog: Catalog | None = catalog  # one catalog (and its engine) for a sink of many tables
        self._location: str | None = None
        self._staging_root = staging_root  # where attempts write, when not the table's data/ directory
        self.merge = merge  # merge mode: the table mirrors a source table (core/merge.py)

    def catalog(self) -> Catalog:
        if self._catalog is None and self._rest is not None:
            self._catalog = rest_catalog(self._rest, self.storage.pyiceberg_properties())
        elif self._catalog is None:
            self._catalog = LedgerCatalog(
                self.catalog_name,
                uri=self._catalog_uri or "",
                warehouse=self.warehouse,
                **self.storage.pyiceberg_properties(),
            )
        return self._catalog

    def table(self) -> Table:
        return self.catalog().load_table(self.identifier)

    def create_table(self, schema: Any) -> Table:
        """Create the table unless it exists. A REST catalog places it under its warehouse, unless the
        pipeline's root is on local disk: then under the root (``<root>/<namespace>/<name>``), as the
        ledger's catalog does, which a catalog server on the workers' machines can write."""
        local = self._rest is not None and not is_object_store(self.warehouse)
        location = files.join(self.warehouse, *self.identifier) if local else None
        return self.catalog().create_table_if_not_exists(self.identifier, schema=schema, location=location)

    @property
    def location(self) -> str:
        if self._location is None:
            self._location = files.location_uri(self.table().location())
        return self._location

    def describe(self) -> dict[str, Any]:
        return {"format": "iceberg", "location": self.location, "table": f"{self.catalog_name}.{self.table_name}"}

    def ensure_namespace(self) -> None:
        try:
            self.catalog().create_namespace(self.identifier[:-1])
        except NamespaceAlreadyExistsError:
            pass

    def check_writable(self, decode: DecodeSpec | None) -> None:
        """Create the table, or evolve it by the fields ``decode`` adds; refuse any other difference."""
        catalog = self.catalog()
        wanted = table_schema(decode, self.merge)
        self.ensure_namespace()
        if not catalog.table_exists(self.identifier):
            table = self.create_table(wanted)
            if self.partition_by == "day" and table.spec().is_unpartitioned():
                with table.update_spec() as spec:  # hidden partitioning: no extra column
                    spec.add_field("timestamp", DayTransform(), "timestamp_day")
            return
        table = self.table()
        partitioned = not table.spec().is_unpartitioned()
        if partitioned != (self.partition_by == "day"):
            raise SchemaEvolutionError(
                f"Iceberg table {self.table_name} is partitioned by {table.spec() if partitioned else 'nothing'}, "
                f"this pipeline by {self.partition_by or 'nothing'}. Nothing was planned"
            )
        current = table.schema().as_arrow()
        dropped = _dropped_columns([s.as_arrow() for s in table.schemas().values()], current, wanted)
        if dropped:
            raise SchemaEvolutionError(
                f"Iceberg table {self.table_name}: column(s) {', '.join(dropped)} that this pipeline writes were "
                "dropped from the table by someone else (an earlier schema of the table has them); adding them "
                "again would not bring back their values in earlier batches. Nothing was planned: put the "
                "column(s) back in the table, or write to another table with a new pipeline (another name)"
            )
        problems = _evolution_problems(current, wanted)
        if problems:
            raise SchemaEvolutionError(
                f"Iceberg table {self.table_name}: this pipeline's output schema is not the table's plus new fields "
                f"({'; '.join(problems)}); only adding fields evolves a table. Nothing was planned"
            )
        if current.names != wanted.names or _evolution_problems(wanted, current):  # fields to add
            with table.update_schema() as update:
                update.union_by_name(wanted)

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        return self.location

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        return files.join(self._batch_root(batch_id), attempt_id)

    def _batch_root(self, batch_id: int) -> str:
        """Where every attempt of a batch writes: its data files' common prefix."""
        return files.join(self._staging_root or files.join(self.location, "data"), batch_directory(batch_id))

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        return self.storage.read_report(staging_uri)

    def _snapshot_attempts(self, table: Table, pipeline_uid: str, batch_id: int) -> list[tuple[str, int]]:
        """(attempt, snapshot id) of this pipeline's batch that snapshots in the table's history added,
        oldest first."""
        found = []
        for snapshot in table.snapshots():
            summary = snapshot.summary
            if summary is None or summary[PIPELINE_UID] != pipeline_uid or summary[BATCH] != str(batch_id):
                continue
            if summary[ATTEMPT]:
                found.append((summary[ATTEMPT] or "", snapshot.snapshot_id))
        return found

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        attempts = self._snapshot_attempts(self.table(), pipeline_uid, plan.batch_id)
        return attempts[-1][0] if attempts else None

    def publish(self, tx: LedgerStatements, publication: Publication) -> dict[str, Any] | None:
        """Add the attempt's files (a replay also removes the batch's current ones) in one snapshot; returns
        the table's entry for the ledger's batch row (its snapshot and uuid: see :meth:`check_tables`).

        In the ledger's catalog the pointer moves inside ``tx``. In another catalog the commit is
        idempotent (a batch whose snapshot landed before a crash is not added again) and is retried
        when another writer of the table committed first.
        """
        if publication.staging_uri is None:
            return None  # a batch without records changes nothing a reader could see
        changes = files.join(publication.staging_uri, CHANGES_DIR)
        data = [f.uri for f in self.storage.parquet_files(changes if self.merge else publication.staging_uri)]
        if self.transactional:
            return {self.table_name: self.commit_locked(tx, publication, data)}
        return {self.table_name: self.commit_idempotently(publication, data)}

    def check_tables(self, recorded: Mapping[str, RecordedTable]) -> None:
        """Refuse the table when it is not the one the batch that last committed to it wrote to."""
        seen = recorded.get(self.table_name)
        if seen is None:
            return
        refusal = table_change_refusal(self.catalog_name, seen, self.table_uuid())
        if refusal is not None:
            raise OutputTableChangedError(refusal)

    def table_uuid(self) -> str | None:
        """The table's Iceberg ``table-uuid`` in the catalog now; None when it has no such table."""
        try:
            return str(self.table().metadata.table_uuid)
        except NoSuchTableError:
            return None

    @staticmethod
    def entry(table: Table, snapshot: int | None, records: int) -> dict[str, Any]:
        """What the ledger's batch row records of a commit to ``table``."""
        return {"snapshot_id": snapshot, "records": records, TABLE_UUID: str(table.metadata.table_uuid)}

    def commit_idempotently(self, publication: Publication, data: list[str]) -> dict[str, Any]:
        """Commit ``data`` to a table of another catalog unless a snapshot of the table already holds this
        attempt (a replay: holds it; a commit: holds the batch), retried when another writer committed
        first; returns the table's :meth:`entry` with the snapshot that holds it."""
        for _ in range(COMMIT_TRIES):
            table = self.table()
            landed = self.holding_snapshot(table, publication)
            if landed is not None:
                return self.entry(table, landed, publication.records)
            try:
                return self.entry(table, self._commit(table, publication, data), publication.records)
            except CommitFailedException:
                continue  # another writer committed first: read the table again and retry
        raise OutputLocationError(
            f"Iceberg table {self.table_name}: {COMMIT_TRIES} commits of batch {publication.plan.batch_id} lost to "
            "concurrent writers; nothing of it was added, the batch stays planned: run the commit again"
        )

    def holding_snapshot(self, table: Table, publication: Publication) -> int | None:
        """The snapshot of ``table`` that already holds what ``publication`` would commit (a replay: this
        attempt; a commit: the batch), or None when it is still to be committed."""
        landed = self._snapshot_attempts(table, publication.pipeline_uid, publication.plan.batch_id)
        mine = [snapshot for attempt, snapshot in landed if attempt == publication.attempt_id]
        if mine or (landed and not publication.replay):
            return (mine or [landed[-1][1]])[-1]
        return None

    def commit_locked(self, tx: LedgerStatements, publication: Publication, data: list[str]) -> dict[str, Any]:
        """Commit ``data`` (a replay: instead of the batch's files) with the table's pointer moving in
        ``tx``, creating the table there if it has no catalog row yet; returns the table's :meth:`entry`
        with the new snapshot id (None: still none, a mirror's first merge that put no row)."""
        catalog = self.catalog()
        assert isinstance(catalog, LedgerCatalog)  # only a sink of the ledger's catalog is transactional
        with catalog.bound(tx):
            if not catalog.exists_locked(self.identifier):
                catalog.create_locked(self.identifier, table_schema(publication.decode, self.merge))
            table = catalog.load_locked(self.identifier)
            return self.entry(table, self._commit(table, publication, data), publication.records)

    def _batch_files(self, table: Table, batch_id: int) -> list[Any]:
        prefix = self._batch_root(batch_id) + "/"
        return [task.file for task in table.scan().plan_files() if task.file.file_path.startswith(prefix)]

    def _commit(self, table: Table, publication: Publication, data: list[str]) -> int | None:
        snapshot = self.staged(table, publication, data).commit_transaction().current_snapshot()
        return snapshot.snapshot_id if snapshot is not None else None

    def staged(self, table: Table, publication: Publication, data: list[str]) -> Transaction:
        """The table's transaction with ``data`` added (a replay: instead of the batch's files; a mirror:
        merged), not committed yet."""
        properties = publication.commit_properties()
        transaction = table.transaction()
        if self.merge is not None:
            if publication.replay:
                what = self._replayed(publication)
                before = self._state_before(table, publication.pipeline_uid, publication.plan.batch_id, what)
                iceberg_merge.restore(transaction, table, before, properties, what)
            changes = read_changes(self.storage, data)
            rewrite = None  # a replay merges on the state before the batch, not the one Spark's rewrites are of
            if not publication.replay and publication.staging_uri is not None:
                report = self.read_report(publication.staging_uri)
                rewrite = spark_rewrite(self.storage, publication.staging_uri, report)
            iceberg_merge.merge(transaction, changes, self.merge.key, properties, rewrite)
        elif publication.replay:
            old = self._batch_files(table, publication.plan.batch_id)
            new = _parquet_files_to_data_files(transaction.table_metadata, data, table.io)
            with transaction.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
                for data_file in old:
                    overwrite.delete_data_file(data_file)
                for data_file in new:
                    overwrite.append_data_file(data_file)
        else:
            transaction.add_files(data, snapshot_properties=properties, check_duplicate_files=False)
        return transaction

    def rewrite_base(self) -> dict[str, Any] | None:
        """A mirror's job ``merge.rewrite``: the table's data files for Spark to rewrite those holding a changed
        key (:func:`~airflow_kafka_offsets.sinks.iceberg_merge.rewrite_job`); None for an appending table."""
        if self.merge is None:
            return None
        try:
            table: Table | None = self.table()
        except NoSuchTableError:
            table = None  # a mirror's first batch creates it
        return iceberg_merge.rewrite_job(table, self.merge.key)

    @staticmethod
    def _replayed(publication: Publication) -> str:
        return f"replay of batch {publication.plan.batch_id} of {publication.plan.pipeline!r} into a mirror table"

    def _state_before(
        self, table: Table, pipeline_uid: str, batch_id: int, what: str, instead: str = REPLAY_ONLY_LATEST
    ) -> int | None:
        """The snapshot a mirror was at before the batch's first merge (None: before any snapshot), refused
        unless the table's current snapshot is the batch's last: a later commit (a later batch, another
        writer) would be lost by putting back the state before it."""
        mine = self._snapshot_attempts(table, pipeline_uid, batch_id)
        current = table.current_snapshot()
        if not mine:  # its merge changed no row: the state before it is the current one
            return current.snapshot_id if current is not None else None
        last = mine[-1][1]
        if current is None or current.snapshot_id != last:
            raise MergeOperationRefusedError(
                f"{what}: the table has commits after the batch's (current snapshot "
                f"{current.snapshot_id if current else None}, the batch's last {last}); putting back the state "
                f"before it would lose them. {instead}"
            )
        first = table.snapshot_by_id(mine[0][1])
        return first.parent_snapshot_id if first is not None else None

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Remove a batch that a crash left in another catalog's table (the ledger's catalog never has one)."""
        if self.transactional:
            return None  # a snapshot only lands with the ledger's commit: an uncommitted batch was never visible
        staged = self.withdrawal(pipeline_uid, plan)
        if staged is None:
            return None
        transaction, left = staged
        transaction.commit_transaction()
        return left

    def withdrawal(self, pipeline_uid: str, plan: BatchPlan) -> tuple[Transaction, str] | None:
        """The table's transaction removing the batch's files (not committed yet) and the staging location
        they came from; None when the table does not hold the batch."""
        table = self.table()
        properties = {PIPELINE_UID: pipeline_uid, BATCH: str(plan.batch_id), ATTEMPT: "", OPERATION: "abort"}
        if self.merge is not None:
            return self._merge_withdrawal(table, pipeline_uid, plan, properties)
        old = self._batch_files(table, plan.batch_id)
        if not old:
            return None
        transaction = table.transaction()
        with transaction.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
            for data_file in old:
                overwrite.delete_data_file(data_file)
        prefix = self._batch_root(plan.batch_id) + "/"
        return transaction, self.staging_uri(
            plan.pipeline, plan.batch_id, old[0].file_path[len(prefix) :].split("/")[0]
        )

    def _merge_withdrawal(
        self, table: Table, pipeline_uid: str, plan: BatchPlan, properties: dict[str, str]
    ) -> tuple[Transaction, str] | None:
        """A mirror's merge that a crash left in the table, taken back by putting back the state before it, only
        when the merge is the table's latest commit (a later one is built on its state)."""
        attempts = self._snapshot_attempts(table, pipeline_uid, plan.batch_id)
        if not attempts:
            return None
        what = f"abort of batch {plan.batch_id} of {plan.pipeline!r}, merged into a mirror table by a crashed commit"
        before = self._state_before(table, pipeline_uid, plan.batch_id, what, ABORT_KEEPS_MERGE)
        transaction = table.transaction()
        iceberg_merge.restore(transaction, table, before, properties, what)
        return transaction, self.staging_uri(plan.pipeline, plan.batch_id, attempts[-1][0])

    def in_use(self, staging_uri: str) -> bool:
        attempt_id = staging_uri.rstrip("/").rsplit("/", 1)[-1]
        return any(s.summary is not None and s.summary[ATTEMPT] == attempt_id for s in self.table().snapshots())

    def discard_attempt(self, staging_uri: str) -> None:
        """Files the table's history holds go with Iceberg's snapshot expiry, not here."""
        if self.storage.exists(staging_uri) and not self.in_use(staging_uri):
            self.storage.remove_tree(staging_uri)

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        return self.storage.batch_attempts(files.join(self.location, "data"))

    def leftover_output(self, output_uri: str) -> str | None:
        return None  # the output is the table: an aborted batch has nothing of its own there

    def remove_output(self, output_uri: str) -> bool:
        return False  # aborted batches never reach the table

    def exists(self, uri: str) -> bool:
        return self.storage.exists(uri)
