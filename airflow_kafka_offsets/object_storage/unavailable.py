"""What to tell a user whose request S3 did not answer: where S3 is, the request, the bound that ended
the wait, what state the batch is in, and what to do.

A read that went unanswered changed nothing. A write (PUT, DELETE) may have been applied with its
answer lost; for a batch's manifest the next run reads it back and so finds whether the batch was
published, never publishing it twice. Either way the step's ledger transaction does not commit.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from airflow_kafka_offsets.object_storage.deadlines import REQUEST_TIMEOUT_S, TIMEOUT

MANIFEST_SUFFIX = "/_manifest"
READS = ("GET", "HEAD")
UNCOMMITTED = "nothing of this step is committed in the ledger (a batch being committed stays planned)"


def shown_endpoint(endpoint: str) -> str:
    """``scheme://host:port`` of an endpoint, without any ``user:password@`` it was written with."""
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def _state(method: str, uri: str) -> str:
    """What the request left behind, and what the next run does about it."""
    if method in READS:
        return f"Nothing was changed by this request; {UNCOMMITTED}"
    state = f"Whether S3 applied the {method} is unknown; {UNCOMMITTED}"
    if uri.endswith(MANIFEST_SUFFIX):
        state += ", and the next run reads the manifest to find whether the batch was published, never twice"
    return state


def unanswered(endpoint: str, method: str, uri: str, timeout_s: float, exc: OSError) -> str:
    """The message for ``method uri`` that S3 at ``endpoint`` did not answer (``exc``: what the socket said)."""
    where = shown_endpoint(endpoint)
    key = f"the object storage connection's extra key {TIMEOUT}, default {REQUEST_TIMEOUT_S:g} s"
    if isinstance(exc, TimeoutError):
        what = f"within {timeout_s:g} s ({key})"
    else:
        what = f"({type(exc).__name__}: {exc}; each wait ends after {timeout_s:g} s, {key})"
    return (
        f"S3 at {where} did not answer {method} {uri} {what}. {_state(method, uri)}. Next: check that this "
        f"worker reaches S3 at {where}, or raise {TIMEOUT} for a slow link, then retry the task"
    )


def server_error(status: int, code: str | None, method: str, uri: str) -> str:
    """The message for ``method uri`` that S3 answered with a server error (5xx)."""
    answer = f"{status} {code}" if code else str(status)
    return f"S3 answered {answer} to {method} {uri}. {_state(method, uri)}. Next: retry the task"
