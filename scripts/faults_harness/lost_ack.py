"""A PostgreSQL wire-protocol proxy that loses one acknowledgment.

The COMMIT of the first transaction that runs a statement matching ``marker`` is passed on to the
server; the server's answer (CommandComplete ``COMMIT``) is read by the proxy and never reaches the
client: both sockets are reset. The client is left not knowing whether its transaction committed,
while it did. A plain TCP proxy cannot time this cut: it needs to see the COMMIT go out and its
answer come back. The client (psycopg2) speaks the simple query protocol, so every statement is a
``Q`` message carrying its SQL text; TLS is not proxied: the proxy refuses encryption requests as a
server without TLS does.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
from dataclasses import dataclass, field

from devstack.kafka_probe import recv_exact
from faults_harness.relay import RelayListener, reset_socket

# Codes of the untyped requests a client may send before its StartupMessage.
_SSL_REQUEST, _GSSENC_REQUEST = 80877103, 80877104


@dataclass
class CommitAckCutter:
    """Listens on loopback; each client connection is relayed to ``upstream``."""

    upstream: tuple[str, int]
    marker: re.Pattern[bytes]
    cut: threading.Event = field(default_factory=threading.Event)  # a COMMIT's answer was dropped
    _listener: RelayListener = field(init=False)

    def __post_init__(self) -> None:
        self._listener = RelayListener(self.upstream, lambda client, server: Relay(self, client, server).start())

    @property
    def port(self) -> int:
        return self._listener.port

    def close(self) -> None:
        self._listener.close()


@dataclass
class Relay:
    """One client connection: the client's messages parsed on their way in, the server's relayed back."""

    owner: CommitAckCutter
    client: socket.socket
    server: socket.socket
    armed: bool = False  # the open transaction ran a statement matching the marker
    cutting: bool = False  # its COMMIT went out: drop the answer

    def start(self) -> None:
        threading.Thread(target=self._from_client, name="lost-ack-in", daemon=True).start()
        threading.Thread(target=self._from_server, name="lost-ack-out", daemon=True).start()

    def _from_client(self) -> None:
        try:
            self._startup()
            while True:
                kind = recv_exact(self.client, 1)
                (length,) = struct.unpack("!i", recv_exact(self.client, 4))
                body = recv_exact(self.client, length - 4)
                if kind == b"Q" and not self.owner.cut.is_set():
                    self._watch(body.rstrip(b"\0").strip())
                self.server.sendall(kind + struct.pack("!i", length) + body)
        except OSError:
            reset_socket(self.server)

    def _startup(self) -> None:
        """The untyped messages up to the StartupMessage. An SSL or GSS encryption request is answered
        ``N`` here, as by a server without them (a client with ``sslmode=prefer`` then goes on in plain
        text; one that requires TLS cannot be relayed)."""
        while True:
            head = recv_exact(self.client, 8)
            length, code = struct.unpack("!ii", head)
            if code not in (_SSL_REQUEST, _GSSENC_REQUEST):
                self.server.sendall(head + recv_exact(self.client, length - 8))
                return
            self.client.sendall(b"N")

    def _watch(self, sql: bytes) -> None:
        statement = sql.upper()
        if self.owner.marker.search(sql):
            self.armed = True
        elif statement in (b"ROLLBACK", b"ABORT"):
            self.armed = False
        elif statement in (b"COMMIT", b"END") and self.armed:
            self.cutting = True

    def _from_server(self) -> None:
        try:
            while True:
                kind = recv_exact(self.server, 1)
                (length,) = struct.unpack("!i", recv_exact(self.server, 4))
                body = recv_exact(self.server, length - 4)
                if self.cutting and kind == b"C" and body.startswith(b"COMMIT"):
                    self.owner.cut.set()  # the server committed; its answer goes nowhere
                    reset_socket(self.client)
                    reset_socket(self.server)
                    return
                self.client.sendall(kind + struct.pack("!i", length) + body)
        except OSError:
            reset_socket(self.client)
