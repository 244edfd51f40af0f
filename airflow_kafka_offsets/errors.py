"""Specific exceptions, so callers and task logs can tell what went wrong."""

from __future__ import annotations


class KafkaOffsetsError(Exception):
    """Base class of every error raised by this package."""


class InvalidPipelineSpecError(KafkaOffsetsError, ValueError):
    """A pipeline definition (name, topics, policies, caps) is not valid."""


class PipelineSpecMismatchError(InvalidPipelineSpecError):
    """A run's pipeline spec differs from the one the ledger holds; changes are made on purpose, not by a run."""


class SpecChangeRefusedError(InvalidPipelineSpecError):
    """A requested spec change cannot be applied (now or ever); nothing was changed."""


class DataLossError(KafkaOffsetsError):
    """Records between the cursor and the log start offset were deleted by retention."""


class RecordsDeletedError(DataLossError):
    """Records of a batch about to be read (a replay, or a planned batch) are no longer in Kafka; found
    from the log start offsets before any Spark job started."""


class OffsetOutOfRangeError(KafkaOffsetsError):
    """A cursor lies beyond a partition's latest offset (topic recreated or truncated)."""


class NoStartingOffsetError(KafkaOffsetsError):
    """A partition has no cursor and the pipeline's policy is to fail rather than pick one."""


class PartitionVanishedError(KafkaOffsetsError):
    """A partition the pipeline has a cursor for is no longer in Kafka."""


class UnknownTopicError(KafkaOffsetsError):
    """A topic of the pipeline does not exist in Kafka."""


class KafkaUnavailableError(KafkaOffsetsError):
    """Kafka did not answer in time (unreachable broker, wrong listener, bad credentials)."""


class KafkaAuthenticationError(KafkaUnavailableError):
    """Kafka refused the connection's credentials (SASL authentication failed), or the broker's TLS
    certificate did not verify against the connection's CA."""


class LedgerError(KafkaOffsetsError):
    """Base class of ledger (PostgreSQL) errors."""


class LedgerSchemaTooNewError(LedgerError):
    """The ledger was migrated by a newer version of this package."""


class PipelineBusyError(LedgerError):
    """Another run holds the pipeline's lock for longer than the configured wait."""


class LedgerConnectionLostError(LedgerError):
    """The ledger's connection broke or its peer went silent past the connection's deadlines."""


class LedgerUnreachableError(LedgerConnectionLostError):
    """No connection to the ledger could be opened (its ``connect_timeout`` ran out, or it was refused);
    nothing was read or written."""


class LedgerStatementTimeoutError(LedgerError):
    """A ledger statement ran past the session's ``statement_timeout``; its transaction was rolled back."""


class BatchNotFoundError(LedgerError):
    """The ledger has no such batch."""


class PipelineNotFoundError(LedgerError):
    """The ledger has no such pipeline (its plan task never ran, or the name is misspelt)."""


class BatchStateError(LedgerError):
    """The batch is not in a state that allows the requested step."""


class MergeOperationRefusedError(BatchStateError):
    """A manual operation a mirror table (merge mode) cannot take: it would apply changes out of order."""


class CursorMovedError(LedgerError):
    """Compare-and-set failed: the cursor no longer equals the batch's start offsets."""


class ReportMismatchError(KafkaOffsetsError):
    """What Spark reports having read does not fit the batch's planned ranges."""


class ConfigurationError(KafkaOffsetsError):
    """A connection or setting needed by an operator is missing or wrong."""


class AirflowFeatureUnavailableError(ConfigurationError):
    """A feature of the package needs a newer Apache Airflow than the one installed."""

    def __init__(self, feature: str, needs: str, installed: str) -> None:
        super().__init__(
            f"{feature} needs Apache Airflow {needs} or later; this is Apache Airflow {installed} "
            f"(upgrade Airflow, or leave the feature out)"
        )
        self.feature = feature
        self.needs = needs
        self.installed = installed


class SparkJobError(KafkaOffsetsError):
    """The Spark job failed or produced no report.

    ``root_cause``: the innermost error Spark's output names (the last Java ``Caused by:``, else the
    last error line that is not py4j's wrapper), which the ledger records with the failed attempt.
    """

    def __init__(self, message: str, root_cause: str | None = None) -> None:
        super().__init__(message)
        self.root_cause = root_cause


class AttemptLeaseLostError(SparkJobError):
    """A Spark attempt's lease ran out or was taken while it ran: its output is discarded, never committed."""


class SparkDataLossError(SparkJobError, DataLossError):
    """Spark could not read records of the batch: Kafka no longer has them."""


class SparkAuthenticationError(SparkJobError):
    """Kafka refused Spark's credentials, or the user may not read the topic."""


class SparkConnectorMissingError(SparkJobError, ConfigurationError):
    """Spark's Kafka connector (or a dependency of it) is not on Spark's classpath."""


class SparkVersionMismatchError(SparkJobError, ConfigurationError):
    """The Spark that runs the batch does not fit its connector, its Connect client or this package."""


class SparkOutOfMemoryError(SparkJobError):
    """The Spark driver or an executor ran out of memory."""


class SparkExecutorLostError(SparkJobError):
    """A Spark executor was lost while running the batch."""


class OutputLocationError(KafkaOffsetsError):
    """An output path is not usable (escapes the output root, not writable, wrong scheme)."""


class SparkKafkaUnavailableError(SparkJobError, KafkaUnavailableError):
    """Spark's Kafka client gave up on the brokers while it read the batch (unreachable, partitioned, too slow)."""


class SparkObjectStoreError(SparkJobError, OutputLocationError):
    """S3 refused Spark's key at the output location, or its bucket does not exist."""


class BackfillRefusedError(ConfigurationError):
    """An ingest step in a backfill run: the cursor, not the run's data interval, decides what it reads."""


class SchemaEvolutionError(OutputLocationError):
    """The pipeline's output schema would change a table other than by adding fields."""


class OutputTableChangedError(OutputLocationError):
    """A table committed batches wrote to was dropped, or replaced by another of the same name, by someone
    else since: writing on would hide those batches from its readers. Nothing was planned."""


class DecodeErrorThresholdError(KafkaOffsetsError):
    """More records than the pipeline allows could not be decoded; the batch is not committed."""


class UnroutableRecordsError(KafkaOffsetsError):
    """Records name no allowed table and the route refuses them; the batch is not committed."""


class CatalogAuthenticationError(ConfigurationError):
    """An Iceberg REST catalog refused the connection's credentials (its OAuth2 client, secret or token)."""


class CatalogUnavailableError(KafkaOffsetsError):
    """An Iceberg REST catalog did not answer within its connection's timeout, or refused the connection
    (a retry may find it back; a commit whose answer was lost is found in the table's history)."""


class SchemaRegistryUnavailableError(KafkaOffsetsError):
    """The schema registry did not answer, or failed to (a retry may find it back)."""


class ObjectStoreUnavailableError(KafkaOffsetsError, OSError):
    """S3 did not answer a request of this worker within the connection's timeout, dropped or refused its
    connection, or answered with a server error (5xx). An OSError too, so code that retries OSErrors
    still does; a write whose answer was lost is found by the next run, never made twice."""


# Errors a retry cannot fix: the operators fail the task at once instead of retrying.
NOT_RETRYABLE: tuple[type[KafkaOffsetsError], ...] = (
    InvalidPipelineSpecError,
    ConfigurationError,
    OutputLocationError,
    DataLossError,
    OffsetOutOfRangeError,
    NoStartingOffsetError,
    PartitionVanishedError,
    UnknownTopicError,
    KafkaAuthenticationError,
    SparkAuthenticationError,
    LedgerSchemaTooNewError,
    BatchNotFoundError,
    PipelineNotFoundError,
    BatchStateError,
    DecodeErrorThresholdError,
)


class ApprovalMismatchError(BatchStateError):
    """What an operation would do now is not what was approved: nothing was changed."""
