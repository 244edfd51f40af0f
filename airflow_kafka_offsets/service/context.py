"""What the service is given from outside, as values and callables: it opens no Airflow connection
and reads no Airflow config itself (:mod:`airflow_kafka_offsets.runtime` builds these from them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.catalogs import ExternalCatalog
from airflow_kafka_offsets.core.model import PipelineSpec
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import S3Access, is_object_store
from airflow_kafka_offsets.service.decoding import RegistryClients
from airflow_kafka_offsets.sinks import LocalDirectorySink, ManifestDirectorySink, Sink, directory_sink, open_sink


class Approval(Protocol):
    def check(self, operation: str, pipeline: str, table: str) -> None: ...


# Runs one Spark job of the app (a job of :func:`airflow_kafka_offsets.service.jobs.build_job`);
# ``airflow_kafka_offsets.spark.runner.BatchRunner`` is one.
Submit = Callable[[dict[str, Any]], None]


def _no_object_storage(location: str) -> S3Access | None:
    if is_object_store(location):
        raise ConfigurationError(f"{location} is on object storage, but no object storage was configured")
    return None


def _no_external_catalog(conn_id: str) -> ExternalCatalog:
    raise ConfigurationError(f"the Iceberg catalog of connection {conn_id!r} cannot be reached: none was configured")


@dataclass(frozen=True)
class SinkOpener:
    """Opens the sink of a pipeline's spec. Where S3 is (``object_storage``: None for a local path) and
    an Iceberg catalog outside the ledger's (``external_catalog``, by connection id: a SQL catalog's
    database or a REST catalog) come from the caller; the defaults know local paths only."""

    object_storage: Callable[[str], S3Access | None] = _no_object_storage
    external_catalog: Callable[[str], ExternalCatalog] = _no_external_catalog

    def for_spec(self, ledger: Ledger, spec: PipelineSpec) -> Sink:
        """The sink a spec names, with the ledger's Iceberg catalog and the object storage of its location."""
        external = self.external_catalog(spec.sink.catalog_conn_id) if spec.sink.catalog_conn_id else None

        def catalog() -> str | None:  # asked for only by the sinks that use the ledger's catalog
            return ledger.catalog_uri

        return open_sink(spec, catalog, ledger.schema, self.object_storage(spec.output_root), external)

    def for_pipeline(self, ledger: Ledger, pipeline: str) -> Sink:
        """The sink the pipeline's stored spec names."""
        with ledger.transaction() as tx:
            spec = tx.pipeline_spec(pipeline)
        return self.for_spec(ledger, spec)

    def directory(self, root: str) -> LocalDirectorySink | ManifestDirectorySink:
        """Parquet directories under ``root`` (a replay's separate output root)."""
        return directory_sink(root, self.object_storage(root))


@dataclass(frozen=True)
class OperationContext:
    """What a manual operation works with. ``submit`` and ``kafka_properties`` only for operations that
    use Spark (replay, catch-up); ``registry`` for those that plan batches of Avro pipelines (catch-up)."""

    ledger: Ledger
    kafka: KafkaOffsetsClient
    actor: Actor
    sinks: SinkOpener = field(default_factory=SinkOpener)
    submit: Submit | None = None
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    registry: RegistryClients | None = None
    # An approved dry run (service/approval.py): the operation checks it before it changes anything.
    approval: Approval | None = None

    def spark(self, operation: str) -> Submit:
        """The Spark runner of an operation that uses Spark."""
        if self.submit is None:
            raise ConfigurationError(f"{operation} runs Spark jobs, but no Spark was given")
        return self.submit
