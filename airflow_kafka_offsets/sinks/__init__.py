"""Where batch output goes and how a staged attempt is published (the seam: ``base.Sink``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from airflow_kafka_offsets.core.catalogs import ExternalCatalog, RestCatalogConfig
from airflow_kafka_offsets.core.model import PipelineSpec, SinkFormat
from airflow_kafka_offsets.core.sink_formats import SINK_FORMATS
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.access import S3Access, is_object_store
from airflow_kafka_offsets.sinks.base import ChecksReplay, ChecksTables, Publication, Sink
from airflow_kafka_offsets.sinks.local import LocalDirectorySink
from airflow_kafka_offsets.sinks.manifest import ManifestDirectorySink
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME

__all__ = [
    "MULTI_TABLE_OPENER",
    "OPENERS",
    "REPORT_NAME",
    "ChecksReplay",
    "ChecksTables",
    "LocalDirectorySink",
    "ManifestDirectorySink",
    "Publication",
    "Sink",
    "SinkOpening",
    "directory_sink",
    "open_sink",
]


def directory_sink(root: str, s3: S3Access | None = None) -> LocalDirectorySink | ManifestDirectorySink:
    """Parquet directories under ``root``: published by rename on a filesystem, by a manifest on S3."""
    if is_object_store(root):
        return ManifestDirectorySink(root, s3)
    return LocalDirectorySink(root)


@dataclass(frozen=True)
class SinkOpening:
    """What an opener gets: the pipeline's spec and where its catalog and storage are (see :func:`open_sink`)."""

    spec: PipelineSpec
    catalog: str | Callable[[], str | None] | None
    catalog_name: str
    s3: S3Access | None
    external_catalog: ExternalCatalog | None

    @property
    def catalog_uri(self) -> str | None:
        """The ledger's database as a SQLAlchemy URL, made only for the sinks that use it."""
        return self.catalog() if callable(self.catalog) else self.catalog


def _open_directory(o: SinkOpening) -> Sink:
    return directory_sink(o.spec.output_root, o.s3)


def _open_iceberg(o: SinkOpening) -> Sink:
    from airflow_kafka_offsets.object_storage.storage import Storage
    from airflow_kafka_offsets.sinks.iceberg import IcebergSink

    rest = o.external_catalog if isinstance(o.external_catalog, RestCatalogConfig) else None
    return IcebergSink(
        o.spec.output_root,
        o.spec.sink.table or "",
        o.catalog_uri if o.external_catalog is None else (None if rest else str(o.external_catalog)),
        rest.conn_id if rest else o.catalog_name,
        o.spec.sink.partition_by,
        Storage(o.s3),
        transactional=o.external_catalog is None,
        rest=rest,
        merge=o.spec.sink.merge,
    )


def _open_delta(o: SinkOpening) -> Sink:
    from airflow_kafka_offsets.object_storage.storage import Storage
    from airflow_kafka_offsets.sinks.delta import DeltaSink

    return DeltaSink(
        o.spec.output_root, o.spec.sink.table or "", o.spec.sink.partition_by, Storage(o.s3), merge=o.spec.sink.merge
    )


def _open_many_tables(o: SinkOpening) -> Sink:
    from airflow_kafka_offsets.object_storage.storage import Storage
    from airflow_kafka_offsets.sinks.multi import MultiTableSink

    assert o.spec.sink.routes is not None
    return MultiTableSink(
        o.spec.output_root,
        o.spec.name,
        o.spec.sink.routes,
        o.spec.sink.format,
        None if o.external_catalog is not None else o.catalog_uri,
        o.catalog_name,
        Storage(o.s3),
        o.external_catalog,
    )


Opener = Callable[[SinkOpening], Sink]

# One opener per format; what a format takes and its install extra: core.sink_formats.SINK_FORMATS.
OPENERS: Mapping[SinkFormat, Opener] = {
    SinkFormat.DIRECTORY: _open_directory,
    SinkFormat.ICEBERG: _open_iceberg,
    SinkFormat.DELTA: _open_delta,
}
# A spec with ``tables``/``route`` (a format whose SINK_FORMATS row has ``many_tables``): many tables
# of that format, in the ledger's catalog (sinks/multi.py).
MULTI_TABLE_OPENER: Opener = _open_many_tables


def open_sink(
    spec: PipelineSpec,
    catalog_uri: str | Callable[[], str | None] | None,
    catalog_name: str,
    s3: S3Access | None = None,
    external_catalog: ExternalCatalog | None = None,
) -> Sink:
    """The sink a pipeline's spec names.

    Iceberg tables are in the SQL catalog ``catalog_name`` (the ledger's schema name: one catalog
    per ledger) in the ledger's database, ``catalog_uri`` (a SQLAlchemy URL, or how to make it when a
    sink needs it). ``s3``: how to reach
    an ``s3://`` output root. ``external_catalog``: the Iceberg catalog of the spec's
    ``catalog_conn_id`` (a SQL catalog's database URL, or a REST catalog), when it is not the ledger's.

    The table sinks import their libraries only when a pipeline uses them; a missing one is a
    :class:`ConfigurationError` naming the extra that installs it.
    """
    fmt = spec.sink.format
    try:
        opener = MULTI_TABLE_OPENER if spec.sink.routes is not None else OPENERS[fmt]
        return opener(SinkOpening(spec, catalog_uri, catalog_name, s3, external_catalog))
    except ImportError as exc:
        extra = SINK_FORMATS[fmt].extra
        if extra is None or (exc.name or "").partition(".")[0] == __name__.partition(".")[0]:
            raise  # not a library the extra installs: this package's own module failed to import
        raise ConfigurationError(
            f"pipeline {spec.name!r} writes {fmt.value} tables, which needs {exc.name}: "
            f"pip install 'airflow-kafka-offsets[{extra}]'"
        ) from exc
