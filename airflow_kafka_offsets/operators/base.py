"""What every operator of the package shares: the connections, failing at once on errors a retry
cannot fix, and the Spark options of the operators that run (or check) Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.sdk import BaseOperator, Context

from airflow_kafka_offsets.airflow_features import airflow_exception
from airflow_kafka_offsets.core.defaults import DEFAULT_KAFKA_CONN_ID, DEFAULT_POSTGRES_CONN_ID
from airflow_kafka_offsets.core.options import given_options
from airflow_kafka_offsets.core.values import optional_int
from airflow_kafka_offsets.errors import NOT_RETRYABLE, ConfigurationError, InvalidPipelineSpecError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.operators.options import takes_options
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, AirflowRuntime, spark_runner
from airflow_kafka_offsets.sinks import Sink
from airflow_kafka_offsets.spark.options import CONNECTOR_PARAMS, SPARK_PARAMS, SparkJobOptions
from airflow_kafka_offsets.spark.runner import BatchRunner

AirflowFailException = airflow_exception("AirflowFailException")


def parse_batch_id(value: Any) -> int | None:
    """A batch id: the plan task's result (through its XComArg), an int, or a user's template
    ('None' when nothing was planned)."""
    if isinstance(value, Mapping):
        value = value.get("batch_id")
    try:
        return optional_int(value, "batch_id", minimum=1)
    except InvalidPipelineSpecError as exc:
        raise ConfigurationError(str(exc)) from None


class KafkaOffsetsBaseOperator(BaseOperator):
    """Connections shared by every operator of this package; errors a retry cannot fix fail at once.

    :param pipeline: the pipeline's name in the ledger (templated).
    :param kafka_conn_id: the Kafka connection (the apache-kafka provider's ``kafka`` type).
    :param postgres_conn_id: the PostgreSQL connection of the ledger database.
    :param ledger_schema: the ledger's schema (default: ``[kafka_offsets] ledger_schema``).
    """

    template_fields: Sequence[str] = ("pipeline", "kafka_conn_id", "postgres_conn_id", "ledger_schema")

    def __init__(
        self,
        *,
        pipeline: str,
        kafka_conn_id: str = DEFAULT_KAFKA_CONN_ID,
        postgres_conn_id: str = DEFAULT_POSTGRES_CONN_ID,
        ledger_schema: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.kafka_conn_id = kafka_conn_id
        self.postgres_conn_id = postgres_conn_id
        self.ledger_schema = ledger_schema

    def execute(self, context: Context) -> Any:
        try:
            return self.run(context)
        except NOT_RETRYABLE as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc

    def run(self, context: Context) -> Any:
        raise NotImplementedError

    def runtime(self) -> AirflowRuntime:
        """The task's connections (as rendered), which open the ledger and Kafka."""
        return AirflowRuntime(self.kafka_conn_id, self.postgres_conn_id, self.ledger_schema)

    def ledger(self) -> Ledger:
        return self.runtime().ledger()

    def sink_for(self, ledger: Ledger) -> Sink:
        return AIRFLOW_SINKS.for_pipeline(ledger, self.pipeline)


class SparkConnectorOperator(KafkaOffsetsBaseOperator):
    """Where the pipeline's Spark jobs run and the Kafka connector they get: the connection and
    connector options of :class:`~airflow_kafka_offsets.spark.options.SparkJobOptions`
    (``spark_conn_id``, ``spark_jars``, ``spark_packages``)."""

    @takes_options(SparkJobOptions, only=CONNECTOR_PARAMS)
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def spark_options(self) -> SparkJobOptions:
        """The operator's Spark options (as rendered) as one value."""
        return SparkJobOptions.from_params(self)

    def spark_connection_given(self) -> bool:
        """Whether a Spark connection is set (the plan operator checks one only then)."""
        return bool(given_options(SparkJobOptions, self).get("conn_id"))


class SparkJobOperator(SparkConnectorOperator):
    """An operator that runs Spark jobs: the rest of the options of
    :class:`~airflow_kafka_offsets.spark.options.SparkJobOptions` (``spark_conf``, spark-submit's
    resources), and ``on_kill`` stopping the running job (spark-submit, and in cluster mode its
    driver; a Spark Connect session's operations)."""

    template_fields_renderers: ClassVar[dict[str, str]] = {"spark_conf": "json"}

    @takes_options(SparkJobOptions, only=tuple(p for p in SPARK_PARAMS if p not in CONNECTOR_PARAMS))
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._submitter: BatchRunner | None = None

    def spark_runner(self, output_root: str | None, options: SparkJobOptions | None = None) -> BatchRunner:
        """The runner of this task's Spark jobs (``options`` default: the operator's), the one ``on_kill``
        stops; ``output_root`` decides S3 settings."""
        self._submitter = runner = spark_runner(options or self.spark_options(), output_root)
        return runner

    def on_kill(self) -> None:
        if self._submitter is not None:
            self._submitter.kill()
