"""The Spark failure classifier on excerpts of real spark-submit output (Spark 4.2, Kafka 4.1).

The data-loss and connector excerpts come from tests/integration/test_spark_failures.py runs, the
authentication one from test_security.py, the S3 ones from spark-submit writing to s3a:// on the stack's
SeaweedFS with a wrong secret and to a missing bucket; the missing data source from Spark's error-conditions.json;
the memory and executor-lost excerpts follow Spark's and YARN's wording (they need a cluster to happen).
"""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.errors import (
    NOT_RETRYABLE,
    KafkaUnavailableError,
    SparkAuthenticationError,
    SparkConnectorMissingError,
    SparkJobError,
    SparkKafkaUnavailableError,
    SparkObjectStoreError,
)
from airflow_kafka_offsets.spark.failures import FailureKind, FailureScanner, classify, merge_spans, spark_job_error

DATA_LOSS = """\
26/11/22 02:01:30 ERROR Utils: Aborting task
org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are not available in Kafka any more;
either the data was aged out by Kafka or the topic may have been deleted before all the data in the
topic was processed.
If you don't want your streaming query to fail on such cases, set the source option failOnDataLoss to false.
Reason: Could not read records in offset [150, 300) for topic partition t-c830f62119-0
with consumer group spark-kafka-relation-1632f87a-c6a0-4c0b-be39-ba585e077b8d-executor.
at org.apache.spark.sql.kafka010.KafkaExceptions$.couldNotReadOffsetRange(KafkaExceptions.scala:94)
at org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer.throwOnDataLoss(KafkaDataConsumer.scala:766)
26/11/22 02:01:30 WARN TaskSetManager: Lost task 1.0 in stage 0.0 (TID 1) (localhost executor driver): org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are not available in Kafka any more;
Reason: Could not read records in offset [0, 150) for topic partition t-c830f62119-0
26/11/22 02:01:30 ERROR TaskSetManager: Task 1 in stage 0.0 failed 1 times; aborting job
Traceback (most recent call last):
py4j.protocol.Py4JJavaError: An error occurred while calling o62.parquet.
at org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:897)
"""

CONNECTOR = """\
File "/work/wt-spec/spark_apps/kafka_range_batch.py", line 151, in read_ranges
return reader.load().select(*COLUMNS)
py4j.protocol.Py4JJavaError: An error occurred while calling o50.load.
: java.lang.NoClassDefFoundError: org/apache/kafka/common/serialization/ByteArraySerializer
at org.apache.spark.sql.kafka010.KafkaSourceProvider$.<clinit>(KafkaSourceProvider.scala:613)
Caused by: java.lang.ClassNotFoundException: org.apache.kafka.common.serialization.ByteArraySerializer
"""

NO_SOURCE = """\
pyspark.errors.exceptions.captured.AnalysisException: [DATA_SOURCE_NOT_FOUND] Failed to find the data source: kafka. Make sure the provider name is correct and the package is properly registered and compatible with your Spark version. SQLSTATE: 42K02
"""

AUTHENTICATION = """\
org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed: Invalid username or password
"""

# spark-submit reading the stack's SASL_SSL listener with a CA that did not sign the broker's certificate
TLS_UNTRUSTED = """\
26/11/25 18:52:00 ERROR NetworkClient: [AdminClient clientId=adminclient-1] Connection to node -1 (localhost/127.0.0.1:52219) failed authentication due to: SSL handshake failed
org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed
Caused by: javax.net.ssl.SSLHandshakeException: PKIX path building failed: sun.security.provider.certpath.SunCertPathBuilderException: unable to find valid certification path to requested target
	at java.base/sun.security.ssl.Alert.createSSLException(Alert.java:131)
	at org.apache.kafka.common.network.SslTransportLayer.handshake(SslTransportLayer.java:302)
Caused by: sun.security.validator.ValidatorException: PKIX path building failed: sun.security.provider.certpath.SunCertPathBuilderException: unable to find valid certification path to requested target
26/11/25 18:52:00 WARN KafkaOffsetReaderAdmin: Error in attempt 1 getting Kafka offsets:
java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed
"""

S3_DENIED = """\
py4j.protocol.Py4JJavaError: An error occurred while calling o50.parquet.
: java.nio.file.AccessDeniedException: s3a://kafka-offsets/capture/denied: getFileStatus on s3a://kafka-offsets/capture/denied: software.amazon.awssdk.services.s3.model.S3Exception: Forbidden (Service: S3, Status Code: 403, Request ID: 18EA53911B1EE5087E2E0CF1):null
	at org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:277)
	at org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:159)
Caused by: software.amazon.awssdk.services.s3.model.S3Exception: Forbidden (Service: S3, Status Code: 403, Request ID: 18EA53911B1EE5087E2E0CF1)
	at software.amazon.awssdk.services.s3.model.S3Exception$BuilderImpl.build(S3Exception.java:113)
"""

S3_NO_BUCKET = """\
py4j.protocol.Py4JJavaError: An error occurred while calling o51.parquet.
: org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://no-such-bucket-ako/capture/x': getFileStatus on s3a://no-such-bucket-ako/capture/x: software.amazon.awssdk.services.s3.model.NoSuchBucketException: The specified bucket does not exist (Service: S3, Status Code: 404, Request ID: 18EA53A332BD265A0EF7C104) (SDK Attempt Count: 1):NoSuchBucket: The specified bucket does not exist (Service: S3, Status Code: 404, Request ID: 18EA53A332BD265A0EF7C104) (SDK Attempt Count: 1)
	at org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:285)
Caused by: software.amazon.awssdk.services.s3.model.NoSuchBucketException: The specified bucket does not exist (Service: S3, Status Code: 404, Request ID: 18EA53A332BD265A0EF7C104) (SDK Attempt Count: 1)
"""

# spark-submit of a PySpark write whose output root lies under a regular file (Spark 4.2, captured)
PARENT_NOT_A_DIRECTORY = """\
Traceback (most recent call last):
  File "/tmp/ako-ui-capture/fail.py", line 3, in <module>
    spark.range(3).write.parquet("file:///tmp/ako-ui-capture/blocker/out")
  File "/venv/site-packages/pyspark/python/lib/pyspark.zip/pyspark/sql/readwriter.py", line 2093, in parquet
  File "/venv/site-packages/pyspark/python/lib/py4j-0.10.9.9-src.zip/py4j/java_gateway.py", line 1362, in __call__
  File "/venv/site-packages/pyspark/python/lib/pyspark.zip/pyspark/errors/exceptions/captured.py", line 251, in deco
  File "/venv/site-packages/pyspark/python/lib/py4j-0.10.9.9-src.zip/py4j/protocol.py", line 327, in get_return_value
py4j.protocol.Py4JJavaError: An error occurred while calling o28.parquet.
: org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: file:/tmp/ako-ui-capture/blocker
	at org.apache.hadoop.fs.RawLocalFileSystem.mkdirsWithOptionalPermission(RawLocalFileSystem.java:892)
	at org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:873)
	at org.apache.hadoop.fs.RawLocalFileSystem.mkdirsWithOptionalPermission(RawLocalFileSystem.java:900)
	at org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:873)
"""

OUT_OF_MEMORY = """\
26/11/22 03:01:02 ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 3)
java.lang.OutOfMemoryError: Java heap space
26/11/22 03:01:02 ERROR TaskSetManager: Lost executor 1 on 10.0.0.7: Container killed by YARN for exceeding physical memory limits. 4.5 GB of 4.4 GB physical memory used.
"""

EXECUTOR_LOST = """\
26/11/22 03:05:40 ERROR TaskSchedulerImpl: Lost executor 2 on 10.0.0.8: worker lost: Not receiving heartbeat for 60 seconds
26/11/22 03:05:40 WARN TaskSetManager: Lost task 3.0 in stage 0.0 (TID 3) (10.0.0.8 executor 2): ExecutorLostFailure (executor 2 exited caused by one of the running tasks) Reason: worker lost
"""


def test_data_loss_names_topic_partition_and_the_spans_of_every_task():
    failure = classify(DATA_LOSS.splitlines())
    assert failure.kind is FailureKind.DATA_LOSS
    assert failure.cause == (
        "records of the batch are no longer in Kafka: Spark could not read t-c830f62119-0 offsets [0, 300) "
        "(retention or delete-records removed records after the batch was planned)"
    )
    assert "abort the planned batch" in failure.next_step and "on_data_loss='skip'" in failure.next_step
    assert failure.evidence.startswith("org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data")


@pytest.mark.parametrize("topic", ["3284841249", "t-3284841249", "events-2024", "orders.v2-7"])
def test_data_loss_names_the_partition_of_a_topic_whose_name_ends_in_digits(topic):
    failure = classify([f"Reason: Could not read records in offset [0, 300) for topic partition {topic}-12"])
    assert f"Spark could not read {topic}-12 offsets [0, 300) (retention" in failure.cause


def test_missing_connector_classes_and_a_missing_data_source():
    for text, evidence in [
        (CONNECTOR, "java.lang.NoClassDefFoundError: org/apache/kafka/common/serialization/"),
        (NO_SOURCE, "pyspark.errors.exceptions.captured.AnalysisException: [DATA_SOURCE_NOT"),
    ]:
        failure = classify(text.splitlines())
        assert failure.kind is FailureKind.CONNECTOR_MISSING
        assert "kafka-clients" in failure.next_step and "spark_packages" in failure.next_step
        assert failure.evidence.startswith(evidence)


def test_a_missing_avro_module_says_spark_avro():
    line = (
        "pyspark.errors.exceptions.captured.AnalysisException: [AVRO_NOT_LOADED_SQL_FUNCTIONS_UNUSABLE] Cannot call "
        "the FROM_AVRO SQL function because the Avro data source is not loaded."
    )
    failure = classify([line])
    assert failure.kind is FailureKind.CONNECTOR_MISSING
    assert "spark-avro" in failure.cause and "spark-avro_<scala>" in failure.next_step
    assert classify(["java.lang.ClassNotFoundException: org.apache.spark.sql.avro.AvroDataToCatalyst"]).kind is (
        FailureKind.CONNECTOR_MISSING
    )


def test_authentication():
    failure = classify(AUTHENTICATION.splitlines())
    assert failure.kind is FailureKind.AUTHENTICATION
    assert "Invalid username or password" in failure.evidence
    assert "sasl.password" in failure.next_step


def test_an_untrusted_broker_certificate_is_an_authentication_failure_pointing_at_the_ca():
    failure = classify(TLS_UNTRUSTED.splitlines())
    assert failure.kind is FailureKind.AUTHENTICATION
    assert failure.cause.startswith("the TLS handshake with Kafka failed")
    assert "ssl.ca.location" in failure.next_step and "PKIX path building failed" in failure.next_step
    assert failure.evidence == "org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed"
    error = spark_job_error({"pipeline": "orders", "batch_id": 2}, scanner_of(TLS_UNTRUSTED), "exit 1")
    assert isinstance(error, SparkAuthenticationError) and isinstance(error, NOT_RETRYABLE)


def test_s3_refusing_the_key_names_the_bucket_and_the_connection_and_is_not_retried():
    failure = classify(S3_DENIED.splitlines())
    assert failure.kind is FailureKind.OBJECT_STORE_ACCESS
    assert failure.cause == (
        "S3 refused access to bucket 'kafka-offsets' (AccessDenied, at s3a://kafka-offsets/capture/denied)"
    )
    assert "secret" in failure.next_step and "object_storage_conn_id" in failure.next_step
    assert failure.evidence.startswith("java.nio.file.AccessDeniedException: s3a://kafka-offsets/capture/denied")
    error = spark_job_error({"pipeline": "orders", "batch_id": 3}, scanner_of(S3_DENIED), "exit 1")
    assert isinstance(error, SparkObjectStoreError) and isinstance(error, NOT_RETRYABLE)
    assert str(error).startswith("Spark job for batch 3 of pipeline 'orders' failed: S3 refused access to bucket")


def test_a_missing_bucket_is_named_as_missing_not_as_refused_access():
    failure = classify(S3_NO_BUCKET.splitlines())
    assert failure.kind is FailureKind.OBJECT_STORE_ACCESS
    assert failure.cause == "S3 bucket 'no-such-bucket-ako' does not exist (at s3a://no-such-bucket-ako/capture/x)"
    assert failure.next_step.startswith("create the bucket, or fix the bucket in the output location")
    # the same words without a location (a bare 'Caused by') name no bucket, so they are not taken alone
    assert classify(S3_NO_BUCKET.splitlines()[-1:]) is None


def scanner_of(text: str) -> FailureScanner:
    scanner = FailureScanner()
    for line in text.splitlines():
        scanner.feed(line)
    return scanner


def test_memory_outranks_the_executor_it_took_down():
    assert classify(OUT_OF_MEMORY.splitlines()).kind is FailureKind.OUT_OF_MEMORY
    assert classify(reversed(OUT_OF_MEMORY.splitlines())).kind is FailureKind.OUT_OF_MEMORY


def test_executor_lost():
    failure = classify(EXECUTOR_LOST.splitlines())
    assert failure.kind is FailureKind.EXECUTOR_LOST and "cluster manager" in failure.next_step


def test_data_loss_outranks_everything_after_it():
    assert classify((EXECUTOR_LOST + DATA_LOSS).splitlines()).kind is FailureKind.DATA_LOSS


def test_unknown_output_has_no_cause_but_keeps_the_last_error_line():
    scanner = FailureScanner()
    lines = [
        "26/11/22 INFO SparkContext: Running Spark version 4.2.0",
        "Traceback (most recent call last):",
        "ValueError: unsupported job format 7, expected 1",
        "  at something",
    ]
    assert list(scanner.scan(iter(lines))) == lines  # passes every line through
    assert scanner.found is None and scanner.last_error_line == "ValueError: unsupported job format 7, expected 1"


def test_merge_spans_joins_adjacent_and_overlapping_parts_per_partition():
    assert merge_spans([("t-0", 150, 300), ("t-0", 0, 150), ("t-1", 5, 9), ("t-1", 20, 30), ("t-1", 8, 12)]) == [
        ("t-0", 0, 300),
        ("t-1", 5, 12),
        ("t-1", 20, 30),
    ]


def test_the_final_error_names_the_cause_or_the_last_error_but_never_the_command_line():
    job = {"batch_id": 7, "pipeline": "orders"}
    hook_message = (
        "Cannot execute: spark-submit --master local[2] --files /tmp/kafka-batch-x/job.json "
        "--job-file /tmp/kafka-batch-x/job.json. Error code is: 1.\nLast spark-submit output:\nat x.y(Z)"
    )
    known = FailureScanner()
    for line in NO_SOURCE.splitlines():
        known.feed(line)
    error = spark_job_error(job, known, hook_message)
    assert type(error) is SparkConnectorMissingError
    assert str(error).startswith("Spark job for batch 7 of pipeline 'orders' failed: Spark's Kafka connector")
    unknown = FailureScanner()
    for line in ["Traceback (most recent call last):", "ValueError: unsupported job format 7, expected 1"]:
        unknown.feed(line)
    error = spark_job_error(job, unknown, hook_message)
    assert type(error) is SparkJobError
    assert str(error) == (
        "Spark job for batch 7 of pipeline 'orders' failed: spark-submit exited with code 1; root "
        "cause: ValueError: unsupported job format 7, expected 1. Spark's full output is in the task's log"
    )
    assert error.root_cause == "ValueError: unsupported job format 7, expected 1"


@pytest.mark.parametrize(
    ("output", "root_cause"),
    [
        # no Java cause under py4j's wrapper: the JVM exception it wraps, not "calling o28.parquet"
        (
            PARENT_NOT_A_DIRECTORY,
            "org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: "
            "file:/tmp/ako-ui-capture/blocker",
        ),
        # a chain of causes: the innermost, the last "Caused by:"
        (
            S3_DENIED,
            "software.amazon.awssdk.services.s3.model.S3Exception: Forbidden (Service: S3, Status Code: 403, "
            "Request ID: 18EA53911B1EE5087E2E0CF1)",
        ),
        (
            TLS_UNTRUSTED,
            "sun.security.validator.ValidatorException: PKIX path building failed: "
            "sun.security.provider.certpath.SunCertPathBuilderException: unable to find valid certification path "
            "to requested target",
        ),
        (CONNECTOR, "java.lang.ClassNotFoundException: org.apache.kafka.common.serialization.ByteArraySerializer"),
        # the app's own error line (a Python exception) when no JVM exception is named
        ("Traceback (most recent call last):\nValueError: unsupported job format 7, expected 1\n", None),
    ],
)
def test_the_root_cause_is_the_innermost_error_of_the_output(output, root_cause):
    scanner = FailureScanner()
    for line in output.splitlines():
        scanner.feed(line)
    assert scanner.root_cause == (root_cause or "ValueError: unsupported job format 7, expected 1")


def test_an_unknown_failure_keeps_its_root_cause_in_the_error_and_on_the_exception():
    scanner = FailureScanner()
    for line in PARENT_NOT_A_DIRECTORY.splitlines():
        scanner.feed(line)
    assert scanner.found is None
    error = spark_job_error({"batch_id": 3, "pipeline": "orders"}, scanner, "... Error code is: 1.")
    cause = "org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: file:/tmp/ako-ui-capture/blocker"
    assert error.root_cause == cause
    assert str(error) == (
        f"Spark job for batch 3 of pipeline 'orders' failed: spark-submit exited with code 1; root cause: {cause}. "
        "Spark's full output is in the task's log"
    )
    assert "An error occurred while calling" not in str(error)
    # a known cause keeps its own message and the root cause beside it
    known = FailureScanner()
    for line in S3_DENIED.splitlines():
        known.feed(line)
    error = spark_job_error({"batch_id": 3, "pipeline": "orders"}, known, "")
    assert type(error) is SparkObjectStoreError and error.root_cause.startswith("software.amazon.awssdk")


KAFKA_SILENT = """\
pyspark.errors.exceptions.connect.SparkConnectGrpcException: (java.util.concurrent.ExecutionException) \
org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. Call: listNodes
"""


def test_brokers_that_stopped_answering_are_named_with_the_next_step_and_retried():
    failure = classify(KAFKA_SILENT.splitlines())
    assert failure.kind is FailureKind.KAFKA_UNAVAILABLE
    assert failure.cause.startswith("Spark's Kafka client gave up waiting for the brokers while it read the batch")
    assert "the addresses the brokers advertise" in failure.next_step
    error = spark_job_error({"batch_id": 4, "pipeline": "p"}, scanner_of(KAFKA_SILENT), "")
    assert isinstance(error, SparkKafkaUnavailableError) and isinstance(error, KafkaUnavailableError)
    assert not isinstance(error, NOT_RETRYABLE)
    assert str(error).startswith("Spark job for batch 4 of pipeline 'p' failed: Spark's Kafka client gave up")


def test_authentication_outranks_the_timeout_it_causes():
    lines = [*KAFKA_SILENT.splitlines(), "org.apache.kafka.common.errors.SaslAuthenticationException: bad"]
    assert classify(lines).kind is FailureKind.AUTHENTICATION
