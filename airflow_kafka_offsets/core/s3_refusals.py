"""What to tell a user whom S3 refused: the bucket, the location, and what to check.

Shared by the directory sink's own requests (manifests) and the reading of Spark's S3A errors, so
both say the same. A refused key or a missing bucket is not fixed by retrying.
"""

from __future__ import annotations

from urllib.parse import urlsplit

CONNECTION_HINT = "the aws connection named by [kafka_offsets] object_storage_conn_id"
NO_SUCH_BUCKET = "NoSuchBucket"


def s3_refusal(location: str, code: str) -> str:
    """The message for S3 refusing ``location`` with error ``code`` (AccessDenied, NoSuchBucket, 403...)."""
    bucket = urlsplit(location).netloc
    if code == NO_SUCH_BUCKET:
        return (
            f"S3 bucket {bucket!r} does not exist (at {location}): create it, or fix the bucket in the output "
            f"location; the S3 endpoint is the one of {CONNECTION_HINT}"
        )
    return (
        f"S3 refused access to bucket {bucket!r} ({code}, at {location}): check the access key id, the secret and "
        f"the key's permissions on that bucket in {CONNECTION_HINT}, and its endpoint_url"
    )
