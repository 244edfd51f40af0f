"""The devstack's SigV4 signer against AWS's published example (S3 GET Object with a Range header).

The stack's S3 server accepting the signer's requests proves little on its own (a server could be
lax); this vector is the one in the AWS Signature Version 4 documentation for S3.
"""

from __future__ import annotations

import datetime

from devstack.s3_request import S3Credentials, S3Request, signed_headers

EXAMPLE = S3Credentials(
    "https://examplebucket.s3.amazonaws.com",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "us-east-1",
)


def test_get_object_example_signature() -> None:
    headers = signed_headers(
        EXAMPLE,
        S3Request("GET", "/test.txt", headers={"Range": "bytes=0-9"}),
        now=datetime.datetime(2013, 5, 24, tzinfo=datetime.UTC),
    )
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )
    assert headers["x-amz-content-sha256"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert "wJalrXUtnFEMI" not in repr(EXAMPLE)
