"""One S3 request signed with AWS Signature Version 4, standard library only.

For the requests pyarrow's S3 filesystem cannot make: a conditional put (``If-None-Match: *``,
``If-Match``), as the directory sink's manifests need. The local stack creates its bucket and
checks its server with it too. Path-style addressing.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_kafka_offsets.object_storage.deadlines import REQUEST_TIMEOUT_S

SERVICE = "s3"


@dataclass(frozen=True)
class S3Credentials:
    """Where the server is and who we are (the secret is kept out of repr)."""

    endpoint: str  # http://host:port
    access_key: str
    secret_key: str = field(repr=False)
    region: str = "us-east-1"
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class S3Request:
    """One request to sign and send: ``path`` is ``/bucket/key``; its headers and query are signed too."""

    method: str
    path: str
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class S3Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _signing_key(secret_key: str, day: str, region: str) -> bytes:
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), day)
    for part in (region, SERVICE, "aws4_request"):
        key = _hmac(key, part)
    return key


def signed_headers(creds: S3Credentials, req: S3Request, now: datetime.datetime | None = None) -> dict[str, str]:
    """The request's headers with ``Authorization`` (SigV4 over every header given)."""
    now = now or datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = urllib.parse.urlsplit(creds.endpoint).netloc
    payload_hash = hashlib.sha256(req.body).hexdigest()
    all_headers = {
        **{k.lower(): str(v).strip() for k, v in req.headers.items()},
        "host": host,
        "x-amz-date": stamp,
        "x-amz-content-sha256": payload_hash,
    }
    if creds.session_token:
        all_headers["x-amz-security-token"] = creds.session_token
    names = sorted(all_headers)
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(req.query.items())
    )
    canonical = "\n".join(
        [
            req.method,
            urllib.parse.quote(req.path, safe="/-_.~"),
            canonical_query,
            "".join(f"{n}:{all_headers[n]}\n" for n in names),
            ";".join(names),
            payload_hash,
        ]
    )
    scope = f"{day}/{creds.region}/{SERVICE}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    signature = hmac.new(_signing_key(creds.secret_key, day, creds.region), to_sign.encode("utf-8"), hashlib.sha256)
    all_headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature.hexdigest()}"
    )
    return all_headers


def send(creds: S3Credentials, req: S3Request, timeout: float = REQUEST_TIMEOUT_S) -> S3Response:
    """Send one signed request; each socket operation (connect, send, each read) waits at most ``timeout``
    seconds. Raises OSError when nothing answers (TimeoutError when the wait ran out)."""
    parts = urllib.parse.urlsplit(creds.endpoint)
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(parts.netloc, timeout=timeout)
    target = urllib.parse.quote(req.path, safe="/-_.~")
    if req.query:
        target += "?" + urllib.parse.urlencode(sorted(req.query.items()), quote_via=urllib.parse.quote)
    try:
        conn.request(req.method, target, body=req.body, headers=signed_headers(creds, req))
        resp = conn.getresponse()
        return S3Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()
