"""A pipeline step's Kafka topics and output as Airflow assets, and its OpenLineage events."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_kafka_offsets.core.model import BatchPlan
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.lineage import BatchLineage, kafka_server, literal_topics, topic_asset
from airflow_kafka_offsets.operators.base import KafkaOffsetsBaseOperator
from airflow_kafka_offsets.sinks import Sink

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

NOT_IN_ASSET_GRAPH = (
    "%s: the Kafka topics are not in the DAG's asset graph (%s); the read and commit tasks name them as inlets "
    "when they handle a batch"
)


class KafkaTopicAssetsOperator(KafkaOffsetsBaseOperator):
    """A step of a pipeline that reads Kafka: it names the pipeline's topics as the assets
    ``kafka://<server>/<topic>``, the same URIs whether declared when the DAG is parsed or added
    when the task runs (so Airflow never holds two assets for one topic).

    :param kafka_asset_server: the server in those URIs and in OpenLineage namespaces (default: the
        first bootstrap server of the Kafka connection). Give it when the dag-processor cannot read
        the connection; then parsing does not read it either.
    """

    def __init__(self, *, kafka_asset_server: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_asset_server = kafka_asset_server

    def asset_server(self) -> str:
        """The server naming the topics: the one given, else the connection's first bootstrap server."""
        if self.kafka_asset_server:
            return self.kafka_asset_server
        return kafka_server(self.runtime().kafka_hook().bootstrap_servers())

    def declare_topic_inlets(self, topics: object) -> None:
        """At parse time: the topics as the task's inlets, so Airflow's asset graph shows them before any
        run. Not when a template names the topics or the Kafka connection, or the connection cannot be
        read while parsing: a log line says why, and the read and commit steps name them when they run."""
        names = literal_topics(topics)
        if names is None:
            self.log.info(NOT_IN_ASSET_GRAPH, self.task_id, f"{topics!r} are no literal topic names")
        elif not self.kafka_asset_server and "{{" in self.kafka_conn_id:
            self.log.info(NOT_IN_ASSET_GRAPH, self.task_id, f"the Kafka connection {self.kafka_conn_id!r} is templated")
        else:
            try:
                server = self.asset_server()
            except ConfigurationError as exc:
                self.log.warning(
                    NOT_IN_ASSET_GRAPH + "; give kafka_asset_server to name their server",
                    self.task_id,
                    str(exc).rstrip("."),
                )
            else:
                self.inlets = [*self.inlets, *(topic_asset(server, t) for t in names)]


class KafkaBatchStepOperator(KafkaTopicAssetsOperator):
    """Tells Airflow and OpenLineage what the step read and wrote when it handled a batch: the
    pipeline's topics (as the task's inlets), its output, and the batch."""

    _lineage: BatchLineage | None = None

    def pipeline_lineage(self, ledger: Ledger, sink: Sink) -> BatchLineage:
        """The pipeline's topics and output, looked up before the step changes anything (a lookup
        that fails then fails the step before it reads or commits, not after)."""
        with ledger.transaction() as tx:
            topics = tx.pipeline_spec(self.pipeline).topics
        return BatchLineage(self.pipeline, self.asset_server(), tuple(topics), sink.describe())

    def handled(self, lineage: BatchLineage, plan: BatchPlan, records: int) -> BatchLineage:
        """The batch this run read or committed: the task's inlets and its OpenLineage COMPLETE event."""
        self._lineage = handled = replace(lineage, plan=plan, records=records)
        self.inlets = [*self.inlets, *(a for a in handled.inlets() if a not in self.inlets)]
        return handled

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """Kafka topics in, the output out, and the ``kafkaOffsets`` run facet; nothing when this run
        read or committed no batch (nothing new, or another run had done it)."""
        return self._lineage.openlineage() if self._lineage is not None else None
