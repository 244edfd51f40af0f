"""The stack's signed S3 requests are the package's own (``airflow_kafka_offsets.object_storage.signing``)."""

from airflow_kafka_offsets.object_storage.signing import S3Credentials, S3Request, S3Response, send, signed_headers

__all__ = ["S3Credentials", "S3Request", "S3Response", "send", "signed_headers"]
