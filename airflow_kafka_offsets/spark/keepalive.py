"""How long a Spark Connect session waits for a server or link gone silent mid-job.

A Connect job is one long gRPC call; while the server works it may send nothing for minutes, so no
deadline on the call can tell a slow job from a dead link. HTTP/2 pings can: every ``keepalive_time``
seconds of silence the client pings, and a ping unanswered within ``keepalive_timeout`` seconds ends
the connection (a partition, a dead NAT entry, or a proxy that keeps TCP up for a server that no longer
answers: pings are the server's own answer, not TCP's). The call then fails as unreachable after the
package's few retries, and the task's retry replays the batch. Without them the worker waited forever.

gRPC clients send at most two pings while no data comes, so a server that enforces a longer minimum
between pings (grpc-java's default: 5 minutes) never counts more than the two strikes it tolerates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.connection_form import extra_seconds

TIME_KEY = "keepalive_time"
TIMEOUT_KEY = "keepalive_timeout"


@dataclass(frozen=True)
class ConnectKeepalive:
    """A Connect channel's pings: seconds of silence before one, seconds it may go unanswered."""

    time_s: float = 20.0
    timeout_s: float = 10.0

    @classmethod
    def from_extra(cls, conn_id: str, extra: Mapping[str, Any]) -> ConnectKeepalive:
        """The defaults with the spark_connect connection's extra ``keepalive_time`` and ``keepalive_timeout``."""
        where = f"Spark Connect connection {conn_id!r}"
        return cls(
            extra_seconds(extra, TIME_KEY, cls.time_s, where),
            extra_seconds(extra, TIMEOUT_KEY, cls.timeout_s, where),
        )

    def channel_options(self) -> list[tuple[str, int]]:
        """gRPC's channel arguments for them."""
        return [
            ("grpc.keepalive_time_ms", int(self.time_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout_s * 1000)),
        ]


DEFAULT_KEEPALIVE = ConnectKeepalive()
