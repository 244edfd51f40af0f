"""Network faults below the package: a TCP forwarder that can go silent, and a link through a network
namespace whose packets the kernel drops.

A forwarder in user space acknowledges TCP itself, so the worker's kernel never sees its data go
unacknowledged: it shows what the package does when answers stop (a hung renewal), not keepalives or
TCP_USER_TIMEOUT firing. :class:`SilentLink` puts the worker in a namespace of its own, behind a veth
pair whose both ends get a ``pfifo`` queue of length 0 on :meth:`SilentLink.drop`: every packet is
dropped by the kernel, with no reset and no ICMP, as on a partitioned network. Only that veth pair is
touched; the stack's PostgreSQL stays reachable for everyone else.
"""

from __future__ import annotations

import random
import secrets
import selectors
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Forwarder:
    """Forwards TCP connections from ``listen_host`` (an ephemeral port) to ``target``; :meth:`freeze`
    stops moving bytes (both directions) while keeping every connection open."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self._target = target
        self._server = socket.create_server((listen_host, 0))
        self.address: tuple[str, int] = self._server.getsockname()[:2]
        self._frozen = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = [self._server]
        self._thread = threading.Thread(target=self._serve, name="forwarder", daemon=True)
        self._thread.start()

    def freeze(self) -> None:
        self._frozen.set()

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._server, selectors.EVENT_READ)
        peers: dict[socket.socket, socket.socket] = {}
        while not self._closed.is_set():
            for key, _ in selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._server:
                    client, _ = self._server.accept()
                    upstream = socket.create_connection(self._target)
                    self._sockets += [client, upstream]
                    peers[client], peers[upstream] = upstream, client
                    selector.register(client, selectors.EVENT_READ)
                    selector.register(upstream, selectors.EVENT_READ)
                elif not self._frozen.is_set():
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if data:
                        peers[sock].sendall(data)
                    else:
                        for end in (sock, peers[sock]):
                            with suppress(KeyError, ValueError):
                                selector.unregister(end)
                            end.close()
            if self._frozen.is_set():
                self._closed.wait(0.05)  # nothing moves; keep the selector from spinning on readable sockets
        selector.close()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for sock in self._sockets:
            sock.close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class SilentLink:
    """A network namespace joined to this one by a veth pair; a worker started with :meth:`command`
    reaches ``forwarder`` (which listens on this side of the pair) only across the pair."""

    def __init__(self, target: tuple[str, int]) -> None:
        tag = secrets.token_hex(3)
        self.namespace = f"ako-silent-{tag}"
        self._outer, self._inner = f"aks{tag}o", f"aks{tag}i"
        subnet = random.Random(tag).randrange(0, 1 << 14) * 4  # a /30 inside 10.214.0.0/16
        self.outer_ip = f"10.214.{subnet >> 8}.{(subnet & 0xFF) + 1}"
        self.inner_ip = f"10.214.{subnet >> 8}.{(subnet & 0xFF) + 2}"
        _ip("netns", "add", self.namespace)
        try:
            _ip("link", "add", self._outer, "type", "veth", "peer", "name", self._inner)
            _ip("link", "set", self._inner, "netns", self.namespace)
            _ip("addr", "add", f"{self.outer_ip}/30", "dev", self._outer)
            _ip("link", "set", self._outer, "up")
            _ip("-n", self.namespace, "addr", "add", f"{self.inner_ip}/30", "dev", self._inner)
            _ip("-n", self.namespace, "link", "set", self._inner, "up")
            _ip("-n", self.namespace, "link", "set", "lo", "up")
            self.forwarder = Forwarder(self.outer_ip, target)
        except BaseException:
            self.close()
            raise

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def drop(self) -> None:
        """From now on the kernel drops every packet on the pair, both ways."""
        subprocess.run(["tc", "qdisc", "add", "dev", self._outer, "root", "pfifo", "limit", "0"], check=True)
        subprocess.run(
            ["tc", "-n", self.namespace, "qdisc", "add", "dev", self._inner, "root", "pfifo", "limit", "0"], check=True
        )

    def close(self) -> None:
        if hasattr(self, "forwarder"):
            self.forwarder.close()
        subprocess.run(["ip", "link", "del", self._outer], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True, check=False)


@contextmanager
def silent_link(target: tuple[str, int]) -> Iterator[SilentLink]:
    link = SilentLink(target)
    try:
        yield link
    finally:
        link.close()
