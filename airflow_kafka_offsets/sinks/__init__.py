"""Where batch output goes and how a staged attempt is published (the seam: ``base.Sink``)."""

from __future__ import annotations

from airflow_kafka_offsets.core.model import PipelineSpec, SinkFormat
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.access import S3Access, is_object_store
from airflow_kafka_offsets.sinks.base import Publication, Sink
from airflow_kafka_offsets.sinks.local import LocalDirectorySink
from airflow_kafka_offsets.sinks.manifest import ManifestDirectorySink
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME

__all__ = [
    "REPORT_NAME",
    "LocalDirectorySink",
    "ManifestDirectorySink",
    "Publication",
    "Sink",
    "directory_sink",
    "open_sink",
]


def directory_sink(root: str, s3: S3Access | None = None) -> LocalDirectorySink | ManifestDirectorySink:
    """Parquet directories under ``root``: published by rename on a filesystem, by a manifest on S3."""
    if is_object_store(root):
        return ManifestDirectorySink(root, s3)
    return LocalDirectorySink(root)


def open_sink(
    spec: PipelineSpec,
    catalog_uri: str | None,
    catalog_name: str,
    s3: S3Access | None = None,
    external_catalog_uri: str | None = None,
) -> Sink:
    """The sink a pipeline's spec names.

    Iceberg tables are in the SQL catalog ``catalog_name`` (the ledger's schema name: one catalog
    per ledger) in the ledger's database, ``catalog_uri`` (a SQLAlchemy URL). ``s3``: how to reach
    an ``s3://`` output root. ``external_catalog_uri``: the database of the spec's
    ``catalog_conn_id``, when its Iceberg catalog is not the ledger's.

    The table sinks import their libraries only when a pipeline uses them.
    """
    if spec.sink.format is SinkFormat.DIRECTORY:
        return directory_sink(spec.output_root, s3)
    try:
        from airflow_kafka_offsets.object_storage.storage import Storage

        storage = Storage(s3)
        if spec.sink.routes is not None:
            from airflow_kafka_offsets.sinks.multi import MultiTableSink

            return MultiTableSink(
                spec.output_root, spec.name, spec.sink.routes, spec.sink.format, catalog_uri, catalog_name, storage
            )
        if spec.sink.format is SinkFormat.ICEBERG:
            from airflow_kafka_offsets.sinks.iceberg import IcebergSink

            return IcebergSink(
                spec.output_root,
                spec.sink.table or "",
                external_catalog_uri or catalog_uri,
                catalog_name,
                spec.sink.partition_by,
                storage,
                transactional=external_catalog_uri is None,
            )
        from airflow_kafka_offsets.sinks.delta import DeltaSink

        return DeltaSink(spec.output_root, spec.sink.table or "", spec.sink.partition_by, storage)
    except ImportError as exc:
        raise ConfigurationError(
            f"pipeline {spec.name!r} writes {spec.sink.format.value} tables, which needs {exc.name}: "
            f"pip install 'airflow-kafka-offsets[{spec.sink.format.value}]'"
        ) from exc
