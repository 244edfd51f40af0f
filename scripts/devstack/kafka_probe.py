"""Whether a Kafka broker answers: one Metadata request over a plain socket, so that the stack needs
no Kafka client library to tell a broker that runs from one that serves."""

from __future__ import annotations

import socket
import struct


def probe(host: str, port: int, timeout: float = 3.0) -> bool:
    """True if the broker answers a Metadata (v4) request listing at least one broker.

    Plain-socket Kafka protocol so the devstack needs no Kafka client library.
    """
    client_id = b"devstack"
    # header v1: api_key=3 (Metadata), api_version=4, correlation_id, client_id
    body = struct.pack(">hhih", 3, 4, 7, len(client_id)) + client_id
    body += struct.pack(">ib", -1, 0)  # topics=null (all), allow_auto_topic_creation=false
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", recv_exact(s, 4))[0]
            resp = recv_exact(s, size)
    except (OSError, struct.error):
        return False
    corr, _throttle, n_brokers = struct.unpack(">iii", resp[:12])
    return bool(corr == 7 and n_brokers >= 1)


def recv_exact(s: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``s``; OSError if the peer closes first."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf
