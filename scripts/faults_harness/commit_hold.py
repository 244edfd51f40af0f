"""An HTTP relay that stops the first commit request in flight: a table commit to the Iceberg REST
catalog, or the object store's PUT that commits a batch (a Delta log entry, a directory's manifest).

It holds the commit at one of two moments:

- ``request``: the commit request never reaches the server (the relay holds it), so the table has no
  commit of the batch;
- ``answer``: the server received the request and answered (it committed), the answer never reaches the
  client.

What ends the client's wait is the fault's: the catalog SIGKILLed and restarted (``catalog_restart``), or
the held connection reset (:meth:`CommitHolder.cut`, ``s3_lost_answer``). Either way the client cannot
know which happened: the retry must find out from the table (its history, its log, the manifest).
Only the first commit is held; every other request, on this connection before it or on new ones (a
client's own retry), passes. The relay reads only the request line at the start of each chunk the
client sends, which is where requests start on a keep-alive connection.
"""

from __future__ import annotations

import re
import socket
import threading
from dataclasses import dataclass, field

from faults_harness.relay import RelayListener, reset_socket

CATALOG_COMMIT = re.compile(rb"^POST /v1/(?:\S+/)?(?:namespaces/[^/\s]+/tables/[^/\s]+|transactions/commit) HTTP/")
"""A commit to an Iceberg REST catalog: a ``POST`` to a table or to the multi-table transaction."""
S3_COMMIT = re.compile(rb"^PUT /\S*(?:/_delta_log/(?!0{20}\.json)\d{20}\.json|/_manifest) HTTP/")
"""The object store's commit of a batch: a Delta log entry's conditional PUT (not version 0, which creates a
table), a directory's manifest."""
MOMENTS = ("request", "answer")


@dataclass
class CommitHolder:
    """Listens on loopback; each client connection is relayed to ``upstream``, the first request matching
    ``commit`` held at ``moment``."""

    upstream: tuple[str, int]
    moment: str  # one of MOMENTS
    commit: re.Pattern[bytes] = CATALOG_COMMIT
    seen: threading.Event = field(default_factory=threading.Event)  # a commit request arrived
    held: threading.Event = field(default_factory=threading.Event)  # ... and is held at ``moment``
    request_line: bytes = b""
    _holding: _Relay | None = None
    _listener: RelayListener = field(init=False)

    def __post_init__(self) -> None:
        if self.moment not in MOMENTS:
            raise ValueError(f"moment {self.moment!r} is not one of {', '.join(MOMENTS)}")
        self._listener = RelayListener(self.upstream, self._relay)

    @property
    def port(self) -> int:
        return self._listener.port

    def cut(self) -> None:
        """Reset the held commit's connection (both ends): its client sees the link drop unanswered."""
        if self._holding is not None:
            reset_socket(self._holding.client)
            reset_socket(self._holding.server)

    def close(self) -> None:
        self._listener.close()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        relay = _Relay(self, client, server)
        threading.Thread(target=relay.from_client, name="commit-hold-in", daemon=True).start()
        threading.Thread(target=relay.from_server, name="commit-hold-out", daemon=True).start()


@dataclass
class _Relay:
    owner: CommitHolder
    client: socket.socket
    server: socket.socket
    committing: bool = False  # this connection carries the commit being held

    def from_client(self) -> None:
        try:
            while chunk := self.client.recv(65536):
                if not self.owner.seen.is_set() and self.owner.commit.match(chunk):
                    self.owner.request_line = chunk.split(b"\r\n", 1)[0]
                    self.committing = True
                    self.owner._holding = self
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
