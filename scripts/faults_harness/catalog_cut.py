"""An HTTP relay in front of the Iceberg REST catalog that stops the first table commit in flight.

The catalog is SIGKILLed and restarted while a commit request of the batch is in flight, at one of
two moments the relay can hold still:

- ``request``: the commit request never reaches the server (the relay holds it), so the table has no
  snapshot of the batch;
- ``answer``: the server received the request and answered (it committed), the answer never reaches the
  client.

Either way the client's connection is reset when the server dies, and it cannot know which happened:
the retry must find out from the table's history. A commit is a ``POST`` to a table
(``/v1/{prefix}/namespaces/{ns}/tables/{table}``) or to the multi-table transaction
(``/v1/{prefix}/transactions/commit``); the relay reads only the request line at the start of each
chunk the client sends, which is where PyIceberg's requests start on a keep-alive connection.
"""

from __future__ import annotations

import re
import socket
import threading
from dataclasses import dataclass, field

from faults_harness.relay import RelayListener, reset_socket

COMMIT_REQUEST = re.compile(rb"^POST /v1/(?:\S+/)?(?:namespaces/[^/\s]+/tables/[^/\s]+|transactions/commit) HTTP/")
MOMENTS = ("request", "answer")


@dataclass
class CatalogCommitHolder:
    """Listens on loopback; each client connection is relayed to ``upstream`` until the first commit."""

    upstream: tuple[str, int]
    moment: str  # one of MOMENTS
    seen: threading.Event = field(default_factory=threading.Event)  # a commit request arrived
    held: threading.Event = field(default_factory=threading.Event)  # ... and is held at ``moment``
    request_line: bytes = b""
    _listener: RelayListener = field(init=False)

    def __post_init__(self) -> None:
        if self.moment not in MOMENTS:
            raise ValueError(f"moment {self.moment!r} is not one of {', '.join(MOMENTS)}")
        self._listener = RelayListener(self.upstream, self._relay)

    @property
    def port(self) -> int:
        return self._listener.port

    def close(self) -> None:
        self._listener.close()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        relay = _Relay(self, client, server)
        threading.Thread(target=relay.from_client, name="catalog-cut-in", daemon=True).start()
        threading.Thread(target=relay.from_server, name="catalog-cut-out", daemon=True).start()


@dataclass
class _Relay:
    owner: CatalogCommitHolder
    client: socket.socket
    server: socket.socket
    committing: bool = False  # this connection carries the commit being held

    def from_client(self) -> None:
        try:
            while chunk := self.client.recv(65536):
                if not self.owner.seen.is_set() and COMMIT_REQUEST.match(chunk):
                    self.owner.request_line = chunk.split(b"\r\n", 1)[0]
                    self.committing = True
                    self.owner.seen.set()
                    if self.owner.moment == "request":
                        self.owner.held.set()
                if self.committing and self.owner.moment == "request":
                    continue  # held: the server never gets it
                self.server.sendall(chunk)
        except OSError:
            pass
        reset_socket(self.server)

    def from_server(self) -> None:
        try:
            while chunk := self.server.recv(65536):
                if self.committing:
                    self.owner.held.set()  # the server answered the commit: the answer goes nowhere
                    continue
                self.client.sendall(chunk)
        except OSError:
            pass
        reset_socket(self.client)
