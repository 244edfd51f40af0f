"""What Airflow and OpenLineage are told a pipeline reads and writes.

Airflow assets: each topic is ``kafka://<server>/<topic>`` (the apache-kafka provider's scheme and
asset factory), the server being the first bootstrap server of the Kafka connection unless the
DAG names one. The plan step declares them as its inlets when the DAG is parsed, if the topics are
literal (see :func:`literal_topics`), so they are in Airflow's asset graph before any run; the read
and commit steps add the same assets as inlets when they handle a batch. The output is an asset
whose URI is the pipeline's output location (its directory under the directory sink's root, the
Iceberg or Delta table's location). The commit step declares the output through the alias
``kafka_offsets/<pipeline>``: an alias is known from the pipeline name alone (the location is only
known once the spec is stored), and a task emits through an alias only what it adds at run time, so
a run that commits nothing emits nothing. Downstream DAGs schedule on
``pipeline_output_alias(pipeline)``.

OpenLineage: the same topics (namespace ``kafka://<server>``, name = topic) in, the sink's location
out, and a ``kafkaOffsets`` run facet naming the batch and its ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.providers.apache.kafka.assets.kafka import create_asset
from airflow.sdk import Asset, AssetAlias

from airflow_kafka_offsets.core.model import BatchPlan, batch_directory
from airflow_kafka_offsets.core.spec import validate_topics
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.object_storage.storage import join

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

ALIAS_PREFIX = "kafka_offsets/"
RUN_FACET = "kafkaOffsets"


def pipeline_output_alias(pipeline: str) -> AssetAlias:
    """The alias a pipeline's commits emit through: what a downstream DAG schedules on."""
    return AssetAlias(name=f"{ALIAS_PREFIX}{pipeline}")


def pipeline_batches_asset(pipeline: str) -> Asset:
    """The pipeline's committed batches as one partitioned asset (Airflow 3.3+): each commit emits an
    event on it whose partition key names the batch (:func:`batch_partition_key`)."""
    return Asset(name=f"kafka_offsets_batches/{pipeline}", uri=f"kafka-offsets://{pipeline}/batches")


def batch_partition_key(batch_id: int) -> str:
    """The partition key of a batch's event: ``batch=000000000042``, as the batch's output directory
    is named (so keys sort in batch order)."""
    return batch_directory(batch_id)


def kafka_server(bootstrap_servers: str) -> str:
    """The first bootstrap server: the host part of Kafka asset URIs and OpenLineage namespaces."""
    return bootstrap_servers.split(",")[0].strip()


def topic_asset(server: str, topic: str) -> Asset:
    """The topic as the apache-kafka provider's asset factory names it: ``kafka://<server>/<topic>``."""
    return create_asset(server=server, topic=topic)


def literal_topics(topics: object) -> tuple[str, ...] | None:
    """The topics when the DAG file names them as they are, so parsing knows them; None when a
    template or an XComArg names them (known only once rendered), or a name is invalid (the plan
    step says why when it runs)."""
    if not isinstance(topics, (str, list, tuple)):
        return None
    try:
        return validate_topics("", topics)  # no topic name holds "{" or " ": a template fails here
    except InvalidPipelineSpecError:
        return None


def output_asset(location: str) -> Asset:
    """The output as an asset: its URI (and name) is the sink's location."""
    return Asset(uri=location)


def dataset_name(location: str) -> tuple[str, str]:
    """OpenLineage (namespace, name) of a location: ``file`` + path, or ``scheme://authority`` + key."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file"):
        return "file", parts.path
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")


@dataclass(frozen=True)
class BatchLineage:
    """One step's account of a batch: the pipeline's topics, where its output lives, and the batch
    this run read or committed (None when it did nothing)."""

    pipeline: str
    server: str  # names the topics: kafka://<server>/<topic>
    topics: tuple[str, ...]
    output: Mapping[str, Any]  # the sink's describe(): format, location, table
    plan: BatchPlan | None = None
    records: int = 0

    @property
    def location(self) -> str:
        """The pipeline's output: its own directory under a directory sink's root (which several
        pipelines may share), else the table's location."""
        if self.output["format"] == "directory":
            return join(self.output["location"], self.pipeline)
        return str(self.output["location"])

    def inlets(self) -> list[Asset]:
        return [topic_asset(self.server, t) for t in self.topics]

    def batch_facts(self) -> dict[str, Any]:
        """What the asset event and the run facet say about the batch."""
        if self.plan is None:
            return {}
        return {
            "pipeline": self.pipeline,
            "batch_id": self.plan.batch_id,
            "epoch": self.plan.epoch,
            "ranges": [r.to_json() for r in self.plan.ranges],
            "records": self.records,
            "output_uri": self.plan.output_uri,
            "output_location": self.location,
            "output_format": self.output["format"],
            "output_table": self.output.get("table"),
        }

    def openlineage(self) -> OperatorLineage[Any, Any]:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage

        namespace = f"kafka://{self.server}"
        inputs = [Dataset(namespace=namespace, name=t) for t in self.topics]
        if self.plan is None:
            return OperatorLineage(inputs=inputs)
        from airflow_kafka_offsets.openlineage_facets import KafkaOffsetsRunFacet

        out_namespace, out_name = dataset_name(self.location)
        facet = KafkaOffsetsRunFacet(
            pipeline=self.pipeline,
            batchId=self.plan.batch_id,
            epoch=self.plan.epoch,
            ranges=[r.to_json() for r in self.plan.ranges],
            records=self.records,
            outputUri=self.plan.output_uri,
        )
        return OperatorLineage(
            inputs=inputs,
            outputs=[Dataset(namespace=out_namespace, name=out_name)],
            run_facets={RUN_FACET: facet},
        )


def openlineage_parent_conf(conf: Mapping[str, str] | None, context: Any) -> Mapping[str, str] | None:
    """Spark conf plus ``spark.openlineage.parent*`` naming this task, so Spark's own OpenLineage
    events (when the user runs Spark's OpenLineage listener) hang under the Airflow task.

    Unchanged without the OpenLineage provider, with OpenLineage disabled, or when the conf
    already names a parent.
    """
    try:
        from airflow.providers.openlineage.conf import is_disabled
        from airflow.providers.openlineage.utils.spark import inject_parent_job_information_into_spark_properties
    except ImportError:
        return conf
    if is_disabled():
        return conf
    return inject_parent_job_information_into_spark_properties(dict(conf or {}), context)
