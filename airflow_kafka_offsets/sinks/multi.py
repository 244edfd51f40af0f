"""Many Iceberg or Delta tables fed by one pipeline: every batch lands in all its tables, or in none.

The Spark app routes each record (by topic, or by a header: ``core/routing.py``) and writes one
directory per table in one job, under the pipeline's staging root
``<output_root>/_batches/<pipeline>/batch=<N>/<attempt>/_kafka_offsets_table=<table>/``.

Iceberg (catalog in the ledger's database): the commit adds each touched table's files in a new
snapshot and moves every table's catalog row inside the ledger's transaction, the one that advances
the cursor; a table a route names for the first time is created in that transaction too. A reader
sees all the batch's tables at the batch, or none of them. The data files stay where Spark wrote
them (Iceberg references them there).

Iceberg in another catalog (``catalog_conn_id``: a REST catalog, or a SQL catalog in another
database): each touched table gets its own idempotent commit (the single-table sink's), table after
table, then the ledger commits. A crash in between leaves some tables with the batch; the retry skips
every table whose history holds the batch and commits the rest, as for Delta. A table a route names
for the first time is created in the catalog just before its first commit. A REST catalog whose server
implements the multi-table transaction (``sinks/iceberg_rest_transaction.py``) gets every table that
does not hold the batch yet in one transaction instead: a reader sees the batch in all its tables or in
none, though before the ledger says it is committed; an abort takes it out of all of them at once.

Delta (no multi-table transactions): each table gets one Delta commit carrying the batch's app
transaction (``txnAppId`` of the pipeline, ``txnVersion`` = the batch number), table after table,
then the ledger commits. A crash in between leaves some tables with the batch and the ledger
without it; the retry skips every table whose log holds the batch's app transaction and commits the
rest, then the ledger. A table's files are copied into the table's directory before its commit
(delta-rs reads only paths under the table's root).

Either way the ledger's batch row records, per table, the snapshot id or version the batch produced (and
an Iceberg table's uuid, which the next plan checks: ``core/output_tables.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.catalogs import ExternalCatalog, RestCatalogConfig
from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec, SinkFormat, batch_directory
from airflow_kafka_offsets.core.output_tables import RecordedTable
from airflow_kafka_offsets.core.routing import TableRoutes
from airflow_kafka_offsets.errors import OutputLocationError
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.sinks.base import LedgerStatements, Publication
from airflow_kafka_offsets.sinks.schema import output_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import TABLE_COLUMN

STAGING_DIR = "_batches"


class MultiTableSink:
    """Batches of one pipeline routed to the tables of ``routes`` (``format``: Iceberg or Delta)."""

    def __init__(
        self,
        output_root: str,
        pipeline: str,
        routes: TableRoutes,
        sink_format: SinkFormat,
        catalog_uri: str | None,
        catalog_name: str,
        storage: files.Storage | None = None,
        external: ExternalCatalog | None = None,
    ) -> None:
        """``external``: the Iceberg catalog of ``catalog_conn_id`` (then ``catalog_uri`` is unused)."""
        self.root = files.location_uri(output_root)
        self.routes = routes
        self.format = sink_format
        self.storage = storage or files.Storage()
        self.staging_root = files.join(self.root, STAGING_DIR, pipeline)
        self._catalog_uri = catalog_uri
        self._catalog_name = catalog_name
        self._external = external
        self._tables: dict[str, Any] = {}
        self._together: bool | None = None

    @property
    def atomic(self) -> bool:
        """Every table of a batch commits in the ledger's transaction (Iceberg in the ledger's catalog)."""
        return self.format is SinkFormat.ICEBERG and self._external is None

    @property
    def together(self) -> bool:
        """Every table of a batch commits in one multi-table transaction of the REST catalog (its server
        lists the endpoint), just before the ledger's."""
        if self._together is None:
            from airflow_kafka_offsets.sinks.iceberg_rest_transaction import commits_together

            rest = self.format is SinkFormat.ICEBERG and isinstance(self._external, RestCatalogConfig)
            self._together = rest and commits_together(self.table_sink(self.routes.tables[0]).catalog())
        return self._together

    def commits(self) -> str:
        """How a batch's tables commit: ``atomic`` (with the ledger), ``together`` (one catalog transaction,
        before the ledger's) or ``table by table``."""
        return "atomic" if self.atomic else "together" if self.together else "table by table"

    def table_sink(self, name: str) -> Any:
        """The single-table sink of ``name`` (Iceberg ones share one catalog), opened once."""
        if name not in self._tables:
            if self.format is SinkFormat.ICEBERG:
                from airflow_kafka_offsets.sinks.iceberg import IcebergSink

                first = next(iter(self._tables.values()), None)
                rest = self._external if isinstance(self._external, RestCatalogConfig) else None
                self._tables[name] = IcebergSink(
                    self.root,
                    name,
                    self._catalog_uri if self._external is None else (None if rest else str(self._external)),
                    rest.conn_id if rest else self._catalog_name,
                    storage=self.storage,
                    transactional=self._external is None,
                    catalog=first.catalog() if first is not None else None,
                    staging_root=self.staging_root,
                    rest=rest,
                )
            else:
                from airflow_kafka_offsets.sinks.delta import DeltaSink

                self._tables[name] = DeltaSink(self.root, name, storage=self.storage)
        return self._tables[name]

    def describe(self) -> dict[str, Any]:
        catalog = self._external.conn_id if isinstance(self._external, RestCatalogConfig) else self._catalog_name
        tables = [f"{catalog}.{t}" for t in self.routes.tables] if self.format is SinkFormat.ICEBERG else []
        return {
            "format": self.format.value,
            "location": self.root,
            "table": None,  # many: see tables
            "tables": tables or list(self.routes.tables),
            "routes": self.routes.to_json(),
            "commits": self.commits(),
        }

    def check_writable(self, decode: DecodeSpec | None) -> None:
        """Every existing table takes the pipeline's schema (or gains its new fields); missing tables are
        created by the commit that first routes records to them (Iceberg namespaces now)."""
        for name in self.routes.tables:
            sink = self.table_sink(name)
            if self.format is SinkFormat.ICEBERG:
                sink.ensure_namespace()
                if not sink.catalog().table_exists(sink.identifier):
                    continue
            elif not sink.storage.exists(files.join(sink.location, "_delta_log")):
                continue
            sink.check_writable(decode)

    def check_tables(self, recorded: Mapping[str, RecordedTable]) -> None:
        """Refuse an Iceberg table someone else dropped or replaced since a batch committed to it (Delta
        tables record no uuid)."""
        if self.format is SinkFormat.ICEBERG:
            for name in self.routes.tables:
                self.table_sink(name).check_tables(recorded)

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        return self.root

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        return files.join(self.staging_root, batch_directory(batch_id), attempt_id)

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        return self.storage.read_report(staging_uri)

    def _touched(self, staging_uri: str) -> dict[str, tuple[int, list[dict[str, Any]] | None]]:
        """Per table of an attempt, its records and where they are (per partition), from its report."""
        routing = (self.storage.read_report(staging_uri) or {}).get("routing") or {}
        landed = routing.get("landed") or {}
        return {str(t): (int(n), landed.get(t)) for t, n in routing.get("tables", {}).items() if int(n) > 0}

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """None: an Iceberg batch is only in its tables with the ledger's commit, and a Delta batch a
        crash left in some tables is finished table by table by the next commit (see publish)."""
        return None

    def publish(self, tx: LedgerStatements, publication: Publication) -> dict[str, Any] | None:
        """Each touched table's commit, Iceberg in ``tx``; returns per table its snapshot id or version."""
        if publication.staging_uri is None:
            return None
        touched = self._touched(publication.staging_uri)
        if self.together:
            return self._publish_together(publication, touched)
        done: dict[str, Any] = {}
        for name, (records, landed) in sorted(touched.items()):
            data = files.join(publication.staging_uri, f"{TABLE_COLUMN}={name}")
            sink = self.table_sink(name)
            own = publication.for_table(records, landed)  # the table's commit says what it holds
            if self.format is SinkFormat.ICEBERG:
                files_in = [f.uri for f in self.storage.parquet_files(data)]
                if self.atomic:
                    done[name] = sink.commit_locked(tx, own, files_in)
                else:
                    sink.create_table(output_schema(own.decode))
                    done[name] = sink.commit_idempotently(own, files_in)
            else:
                done[name] = {"version": sink.commit_once(own, data), "records": records}
        return done

    def _publish_together(
        self, publication: Publication, touched: dict[str, tuple[int, list[dict[str, Any]] | None]]
    ) -> dict[str, Any]:
        """Every touched table that does not hold the batch yet, in one REST catalog transaction; staged
        again on the tables as they now are when another writer moved one of them first."""
        from pyiceberg.exceptions import CommitFailedException

        from airflow_kafka_offsets.sinks.iceberg import COMMIT_TRIES
        from airflow_kafka_offsets.sinks.iceberg_rest_transaction import commit_together

        own = {name: publication.for_table(records, landed) for name, (records, landed) in touched.items()}
        for _ in range(COMMIT_TRIES):
            staged = []
            for name in sorted(touched):
                sink = self.table_sink(name)
                sink.create_table(output_schema(own[name].decode))
                table = sink.table()
                if sink.holding_snapshot(table, own[name]) is None:
                    data = files.join(publication.staging_uri or "", f"{TABLE_COLUMN}={name}")
                    staged.append(sink.staged(table, own[name], [f.uri for f in self.storage.parquet_files(data)]))
            if not staged:
                break
            try:
                commit_together(self.table_sink(self.routes.tables[0]).catalog(), staged)
            except CommitFailedException:
                continue
            break
        else:
            raise OutputLocationError(
                f"{COMMIT_TRIES} transactions of batch {publication.plan.batch_id} into tables "
                f"{', '.join(sorted(touched))} lost to concurrent writers; nothing of it was added, the batch stays "
                "planned: run the commit again"
            )
        done: dict[str, Any] = {}
        for name, (records, _) in sorted(touched.items()):
            sink = self.table_sink(name)
            table = sink.table()
            done[name] = sink.entry(table, sink.holding_snapshot(table, own[name]), records)
        return done

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Iceberg in the ledger's catalog: nothing (an uncommitted batch was never in a table). Delta, and
        Iceberg in another catalog: remove the batch from every table a crashed commit left it in (in one
        transaction where the REST catalog commits tables together)."""
        left = None
        if self.together:  # out of every table at once, as it went in
            from airflow_kafka_offsets.sinks.iceberg_rest_transaction import commit_together

            staged = [w for w in (self.table_sink(n).withdrawal(pipeline_uid, plan) for n in self._existing()) if w]
            if staged:
                commit_together(self.table_sink(self.routes.tables[0]).catalog(), [t for t, _ in staged])
                left = staged[-1][1]
        elif not self.atomic:
            for name in self._existing():
                left = self.table_sink(name).withdraw(tx, pipeline_uid, plan) or left
        return left

    def in_use(self, staging_uri: str) -> bool:
        return any(self.table_sink(name).in_use(staging_uri) for name in self._existing())

    def _existing(self) -> list[str]:
        if self.format is SinkFormat.ICEBERG:
            catalog = self.table_sink(self.routes.tables[0]).catalog()
            return [t for t in self.routes.tables if catalog.table_exists(self.table_sink(t).identifier)]
        return [
            t for t in self.routes.tables if self.storage.exists(files.join(self.table_sink(t).location, "_delta_log"))
        ]

    def discard_attempt(self, staging_uri: str) -> None:
        """An attempt a table's history names stays (Iceberg reads its files; its _errors/ stay readable)."""
        if self.storage.exists(staging_uri) and not self.in_use(staging_uri):
            self.storage.remove_tree(staging_uri)

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        return self.storage.batch_attempts(self.staging_root)

    def leftover_output(self, output_uri: str) -> str | None:
        return None  # the output is the tables: an aborted batch has nothing of its own there

    def remove_output(self, output_uri: str) -> bool:
        return False

    def exists(self, uri: str) -> bool:
        return self.storage.exists(uri)
