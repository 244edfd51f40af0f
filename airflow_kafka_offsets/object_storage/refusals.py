"""What to tell a user whom S3 refused: the bucket, the location, and what to check.

Shared by the directory sink's own requests (manifests) and the reading of Spark's S3A errors, so
both say the same. A refused key or a missing bucket is not fixed by retrying.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

CONNECTION_HINT = "the S3 connection named by [kafka_offsets] object_storage_conn_id"
NO_SUCH_BUCKET = "NoSuchBucket"


@dataclass(frozen=True)
class S3Refusal:
    """S3 refused ``location`` with error ``code`` (AccessDenied, InvalidAccessKeyId, NoSuchBucket, 403...)."""

    location: str
    code: str

    @property
    def bucket(self) -> str:
        return urlsplit(self.location).netloc

    @property
    def cause(self) -> str:
        if self.code == NO_SUCH_BUCKET:
            return f"S3 bucket {self.bucket!r} does not exist (at {self.location})"
        return f"S3 refused access to bucket {self.bucket!r} ({self.code}, at {self.location})"

    @property
    def next_step(self) -> str:
        if self.code == NO_SUCH_BUCKET:
            return (
                "create the bucket, or fix the bucket in the output location; the S3 endpoint is the one of "
                f"{CONNECTION_HINT}"
            )
        return (
            f"check the access key id, the secret and the key's permissions on that bucket in {CONNECTION_HINT}, "
            "and its endpoint_url"
        )


def s3_refusal(location: str, code: str) -> str:
    """The message for S3 refusing ``location`` with error ``code``."""
    refusal = S3Refusal(location, code)
    return f"{refusal.cause}: {refusal.next_step}"
