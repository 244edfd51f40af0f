"""A loopback TCP listener that relays each client connection to an upstream server through a handler
of its own: the base of the harness's protocol-aware proxies (``lost_ack``, ``commit_hold``)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


def reset_socket(sock: socket.socket) -> None:
    """Drop the connection: shutdown first, since a close alone neither wakes this proxy's thread
    blocked reading the socket nor tells the peer while that read holds it open."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


@dataclass
class RelayListener:
    """Listens on loopback; ``relay(client, server)`` starts relaying each accepted connection. A
    connection the upstream refuses (a server being restarted) is refused to the client too."""

    upstream: tuple[str, int]
    relay: Callable[[socket.socket, socket.socket], None]
    _listener: socket.socket = field(init=False)
    _sockets: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def close(self) -> None:
        for sock in [self._listener, *self._sockets]:
            reset_socket(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                reset_socket(client)
                continue
            self._sockets += [client, server]
            self.relay(client, server)
