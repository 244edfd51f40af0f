"""Why a Spark job failed, found in its output: the root cause and the next step, not the exit code.

Pure: fed the lines spark-submit printed (driver log, executor task failures, the
Python traceback), it names the first known cause. The cause of a failed batch
is often hundreds of lines above the last one (a task failure, then retries,
then a stage abort and 20 JVM frames), so every line is scanned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_kafka_offsets.errors import (
    SparkAuthenticationError,
    SparkConnectorMissingError,
    SparkDataLossError,
    SparkExecutorLostError,
    SparkJobError,
    SparkKafkaUnavailableError,
    SparkObjectStoreError,
    SparkOutOfMemoryError,
    SparkVersionMismatchError,
)
from airflow_kafka_offsets.object_storage.refusals import NO_SUCH_BUCKET, S3Refusal

MAX_EVIDENCE = 400


class FailureKind(str, Enum):
    DATA_LOSS = "data_loss"
    AUTHENTICATION = "authentication"
    AUTHORIZATION = "authorization"
    OBJECT_STORE_ACCESS = "object_store_access"
    CONNECTOR_MISSING = "connector_missing"
    VERSION_MISMATCH = "version_mismatch"
    OUT_OF_MEMORY = "out_of_memory"
    EXECUTOR_LOST = "executor_lost"
    KAFKA_UNAVAILABLE = "kafka_unavailable"  # last: any cause above it says more


@dataclass(frozen=True)
class SparkFailure:
    """A known cause: what happened (with topic, partition and span where Spark names them) and what to do."""

    kind: FailureKind
    cause: str
    next_step: str
    evidence: str  # the line of Spark's output that shows it


# Spark's Kafka source, when records of a requested range are gone (failOnDataLoss=true), says
# "KafkaIllegalStateException: Some data may have been lost ..." and, a few lines below, per task
# "Reason: Could not read records in offset [150, 300) for topic partition orders-0".
_LOST_SPAN = re.compile(r"offset \[(?P<start>\d+), (?P<end>\d+)\) for topic partition (?P<tp>\S+-\d+)\b")
_DATA_LOSS_MARKERS = ("Some data may have been lost", "Could not read records in offset")
_DATA_LOSS_NEXT_STEP = (
    "these records cannot be read again: abort the planned batch ('abort' operation) and plan again; the plan "
    "then fails on the lost span unless on_data_loss='skip' records it as skipped (a replay of a committed "
    "batch cannot be rebuilt)"
)


def merge_spans(spans: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Overlapping or adjacent spans of one partition joined (tasks report parts of one range)."""
    merged: list[tuple[str, int, int]] = []
    for tp, start, end in sorted(set(spans)):
        if merged and merged[-1][0] == tp and start <= merged[-1][2]:
            merged[-1] = (tp, merged[-1][1], max(end, merged[-1][2]))
        else:
            merged.append((tp, start, end))
    return merged


def _data_loss(spans: Iterable[tuple[str, int, int]], evidence: str) -> SparkFailure:
    listed = "; ".join(f"{tp} offsets [{start}, {end})" for tp, start, end in merge_spans(spans))
    return SparkFailure(
        FailureKind.DATA_LOSS,
        f"records of the batch are no longer in Kafka: Spark could not read {listed or 'a range of the batch'} "
        "(retention or delete-records removed records after the batch was planned)",
        _DATA_LOSS_NEXT_STEP,
        evidence,
    )


# S3A, when S3 refuses the key or the bucket is missing, names the location on the exception's line:
# "java.nio.file.AccessDeniedException: s3a://b/p: getFileStatus on s3a://b/p: ...S3Exception: Forbidden
# (Service: S3, Status Code: 403, ...)" or "org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://b/p':
# ...NoSuchBucketException: The specified bucket does not exist (... Status Code: 404 ...)".
_S3_LOCATION = re.compile(r"\bs3a?://[^\s'`:,)]+")
_S3_MISSING_BUCKET = ("UnknownStoreException", "NoSuchBucketException", "NoSuchBucket:")
_S3_DENIED = ("AccessDeniedException: s3a://", "AccessDeniedException: s3://", "Status Code: 403")
_S3_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AccessDenied")


def _object_store_refusal(line: str) -> SparkFailure | None:
    location = _S3_LOCATION.search(line)
    if location is None:
        return None
    if any(marker in line for marker in _S3_MISSING_BUCKET):
        code = NO_SUCH_BUCKET
    elif any(marker in line for marker in _S3_DENIED):
        code = next((c for c in _S3_CODES if c in line), "AccessDenied (403 Forbidden)")
    else:
        return None
    refusal = S3Refusal(location.group(0), code)
    return SparkFailure(FailureKind.OBJECT_STORE_ACCESS, refusal.cause, refusal.next_step, _evidence(line))


_RULES: tuple[tuple[FailureKind, tuple[str, ...], str, str], ...] = (
    (
        FailureKind.AUTHENTICATION,
        ("SaslAuthenticationException",),
        "Kafka rejected the credentials of the Kafka connection (authentication failed)",
        "check sasl.mechanism, sasl.username and sasl.password in the Kafka connection, then retry the task",
    ),
    (
        FailureKind.AUTHENTICATION,
        ("SslAuthenticationException",),
        "the TLS handshake with Kafka failed (authentication failed): the broker's certificate did not verify "
        "against the Kafka connection's CA or does not name the host in bootstrap.servers, or the broker refused "
        "the client's certificate",
        "check ssl.ca.location (the CA that signed the brokers' certificates), the host names in bootstrap.servers "
        "and any client key store in the Kafka connection (Spark's output above says which, e.g. 'PKIX path "
        "building failed' for an unknown CA), then retry the task",
    ),
    (
        FailureKind.AUTHORIZATION,
        ("TopicAuthorizationException", "GroupAuthorizationException"),
        "the Kafka user is not authorized to read the topic",
        "grant the connection's user Read and Describe on the topic (ACLs), then retry the task",
    ),
    (
        FailureKind.CONNECTOR_MISSING,
        (
            "Failed to find the data source: kafka",
            "Failed to find data source: kafka",
            "NoClassDefFoundError: org/apache/kafka/",
            "ClassNotFoundException: org.apache.kafka.",
            "NoClassDefFoundError: org/apache/commons/pool2/",
            "ClassNotFoundException: org.apache.commons.pool2.",
        ),
        "Spark's Kafka connector or one of its dependencies is not on Spark's classpath",
        "give Spark the connector built for the Spark that runs the batch, with its dependencies: leave "
        "spark_jars and spark_packages unset for the package's default, or set [kafka_offsets] spark_jars "
        "(spark-sql-kafka-0-10_<scala>, kafka-clients, commons-pool2, spark-token-provider-kafka-0-10) or "
        "spark_packages=org.apache.spark:spark-sql-kafka-0-10_<scala>:<Spark version>",
    ),
    (
        FailureKind.CONNECTOR_MISSING,
        (
            "AVRO_NOT_LOADED_SQL_FUNCTIONS_UNUSABLE",
            "ClassNotFoundException: org.apache.spark.sql.avro.",
            "NoClassDefFoundError: org/apache/spark/sql/avro/",
        ),
        "Spark's Avro module (spark-avro), which decodes the pipeline's Avro values, is not on Spark's classpath",
        "leave spark_jars and spark_packages unset (an Avro batch then gets org.apache.spark:spark-avro_<scala>:"
        "<Spark version> by --packages), or add that jar to spark_jars; a Spark Connect server needs it when it "
        "starts (--jars or --packages)",
    ),
    (
        FailureKind.VERSION_MISMATCH,
        ("Spark's Kafka connector is version", "the driver's Python imports pyspark"),
        "the Spark that ran the batch does not match its Kafka connector or its Python files",
        "give the Spark connection the Spark the batch should run on (spark-version extra, or the cluster's "
        "spark-submit first on PATH) and the connector built for it; a retry cannot fix this",
    ),
    (
        FailureKind.OUT_OF_MEMORY,
        (
            "java.lang.OutOfMemoryError",
            "Container killed by YARN for exceeding",
            "OOMKilled",
            "exceeding memory limits",
        ),
        "Spark ran out of memory",
        "give Spark more memory (driver_memory / executor_memory, spark.executor.memoryOverhead) or make batches "
        "smaller (max_records_per_batch); then retry the task, which replays the same batch",
    ),
    (
        FailureKind.EXECUTOR_LOST,
        ("ExecutorLostFailure", "Lost executor", "Executor heartbeat timed out"),
        "a Spark executor was lost (killed or unreachable) while it ran the batch",
        "look up the executor in the cluster manager's logs (memory limits, preemption, node failure); retry the "
        "task, which replays the same batch",
    ),
    (
        FailureKind.KAFKA_UNAVAILABLE,
        ("org.apache.kafka.common.errors.TimeoutException",),
        "Spark's Kafka client gave up waiting for the brokers while it read the batch (unreachable from Spark's "
        "driver or executors, partitioned, or too slow); nothing of the batch was committed",
        "check that Spark's driver and executors reach the brokers in bootstrap.servers and the addresses the "
        "brokers advertise, then retry the task, which replays the same batch",
    ),
)


def _evidence(line: str) -> str:
    return line.strip().removeprefix(": ")[:MAX_EVIDENCE]


def classify_line(line: str) -> SparkFailure | None:
    """The known cause one line of Spark's output shows, if any."""
    if any(marker in line for marker in _DATA_LOSS_MARKERS):
        span = _LOST_SPAN.search(line)
        spans = [(span["tp"], int(span["start"]), int(span["end"]))] if span else []
        return _data_loss(spans, _evidence(line))
    for kind, markers, cause, next_step in _RULES:
        if any(marker in line for marker in markers):
            return SparkFailure(kind, cause, next_step, _evidence(line))
    return _object_store_refusal(line)


class FailureScanner:
    """Watches output lines as they stream by and keeps the most specific known cause (bounded memory).

    A root cause outranks its consequences: lost data or refused credentials before memory, memory
    before a lost executor (an executor killed for memory is reported as both). Lost spans are
    gathered from every task that reports one.
    """

    def __init__(self) -> None:
        self._found: SparkFailure | None = None
        self._lost_spans: set[tuple[str, int, int]] = set()
        self.last_error_line: str | None = None
        self._caused_by: str | None = None

    def scan(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            self.feed(line)
            yield line

    def feed(self, line: str) -> None:
        failure = classify_line(line)
        if failure is not None:
            span = _LOST_SPAN.search(line) if failure.kind is FailureKind.DATA_LOSS else None
            if span:
                self._lost_spans.add((span["tp"], int(span["start"]), int(span["end"])))
            if self._found is None or _PRIORITY[failure.kind] < _PRIORITY[self._found.kind]:
                self._found = failure
        caused = _CAUSED_BY.match(line)
        if caused:
            self._caused_by = caused.group(1).strip()[:MAX_EVIDENCE]
        if _ERROR_LINE.search(line) and _PY4J_WRAPPER not in line:
            self.last_error_line = _evidence(line)

    @property
    def root_cause(self) -> str | None:
        """The innermost error of the output: the last Java ``Caused by:`` (the bottom of the chain Spark
        printed last), else the last error line that is not py4j's "An error occurred while calling"."""
        return self._caused_by or self.last_error_line

    @property
    def found(self) -> SparkFailure | None:
        if self._found is not None and self._found.kind is FailureKind.DATA_LOSS:
            return _data_loss(self._lost_spans, self._found.evidence)
        return self._found


def classify(lines: Iterable[str]) -> SparkFailure | None:
    """The most specific known cause in ``lines``, or None."""
    scanner = FailureScanner()
    for line in lines:
        scanner.feed(line)
    return scanner.found


_PRIORITY = {kind: rank for rank, kind in enumerate(FailureKind)}
# An exception's own line (not a stack frame): "pyspark.errors...AnalysisException: ...", "java.lang.X: ...",
# and the JVM exception py4j prints under its wrapper (": org.apache.spark.SparkException: ...").
_ERROR_LINE = re.compile(r"^\s*(?::\s*)?(?:Caused by: )?[\w.$]+(?:Exception|Error)(?:: |$)")
_CAUSED_BY = re.compile(r"^\s*Caused by: (\S.*)")
_PY4J_WRAPPER = "An error occurred while calling"


_ERROR_CLASSES: Mapping[FailureKind, type[SparkJobError]] = {
    FailureKind.DATA_LOSS: SparkDataLossError,
    FailureKind.AUTHENTICATION: SparkAuthenticationError,
    FailureKind.AUTHORIZATION: SparkAuthenticationError,
    FailureKind.OBJECT_STORE_ACCESS: SparkObjectStoreError,
    FailureKind.CONNECTOR_MISSING: SparkConnectorMissingError,
    FailureKind.VERSION_MISMATCH: SparkVersionMismatchError,
    FailureKind.OUT_OF_MEMORY: SparkOutOfMemoryError,
    FailureKind.EXECUTOR_LOST: SparkExecutorLostError,
    FailureKind.KAFKA_UNAVAILABLE: SparkKafkaUnavailableError,
}
_EXIT_CODE = re.compile(r"Error code is: (-?\d+)")


def spark_job_error(job: Mapping[str, Any], scanner: FailureScanner, hook_message: str) -> SparkJobError:
    """The exception for a failed spark-submit: the cause found in Spark's output and the next step,
    with the output's root cause (see :attr:`FailureScanner.root_cause`).

    The hook's own message (the command line and a tail of JVM frames) is left out: the full
    output is in the task's log.
    """
    what = f"Spark job for batch {job['batch_id']} of pipeline {job['pipeline']!r} failed"
    root = scanner.root_cause
    failure = scanner.found
    if failure is not None:
        return _ERROR_CLASSES[failure.kind](
            f"{what}: {failure.cause}. Next: {failure.next_step}.\nSpark's output: {failure.evidence}", root
        )
    code = _EXIT_CODE.search(hook_message)
    exit_code = f"spark-submit exited with code {code.group(1)}" if code else "spark-submit failed"
    cause = f"; root cause: {root}" if root else ""
    return SparkJobError(f"{what}: {exit_code}{cause}. Spark's full output is in the task's log", root)
