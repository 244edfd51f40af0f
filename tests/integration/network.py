"""Network faults below the package: a TCP forwarder that can go silent, and a link through a network
namespace whose packets the kernel drops.

A forwarder in user space acknowledges TCP itself, so the worker's kernel never sees its data go
unacknowledged: it shows what the package does when answers stop (a hung renewal), not keepalives or
TCP_USER_TIMEOUT firing. :class:`SilentLink` puts the worker in a network namespace of its own, routed
through a router namespace whose interfaces get a ``pfifo`` queue of length 0 on
:meth:`SilentLink.drop`: every packet is dropped by the kernel, with no reset and no ICMP, as on a
partitioned network. Only those namespaces' links are touched; the stack's PostgreSQL stays
reachable for everyone else.
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
    stops moving bytes (both directions) while keeping every connection open, :meth:`hold_answers` only
    the target's (requests still reach it: an answer lost on the way back), :meth:`thaw` moves them again."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self._target = target
        self._server = socket.create_server((listen_host, 0))
        self.address: tuple[str, int] = self._server.getsockname()[:2]
        self._frozen = threading.Event()
        self._answers_held = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = [self._server]
        self._thread = threading.Thread(target=self._serve, name="forwarder", daemon=True)
        self._thread.start()

    def freeze(self) -> None:
        self._frozen.set()

    def hold_answers(self) -> None:
        self._answers_held.set()

    def thaw(self) -> None:
        self._frozen.clear()
        self._answers_held.clear()

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._server, selectors.EVENT_READ)
        peers: dict[socket.socket, socket.socket] = {}
        upstreams: set[socket.socket] = set()
        while not self._closed.is_set():
            held = self._frozen.is_set() or self._answers_held.is_set()
            for key, _ in selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._server:
                    client, _ = self._server.accept()
                    upstream = socket.create_connection(self._target)
                    upstreams.add(upstream)
                    self._sockets += [client, upstream]
                    peers[client], peers[upstream] = upstream, client
                    selector.register(client, selectors.EVENT_READ)
                    selector.register(upstream, selectors.EVENT_READ)
                elif not self._frozen.is_set() and not (sock in upstreams and self._answers_held.is_set()):
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
            if held:
                self._closed.wait(0.05)  # held bytes: keep the selector from spinning on readable sockets
        selector.close()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for sock in self._sockets:
            sock.close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class SilentLink:
    """A worker's namespace joined to this one through a router namespace (two veth pairs); a worker
    started with :meth:`command` reaches ``forwarder`` (listening on this side) only through the router,
    where :meth:`drop` makes the kernel drop every packet both ways. The worker's own kernel sends its
    packets as usual (a drop on its own interface would be a local error it sees at once): to it, the
    peer went silent."""

    def __init__(self, target: tuple[str, int]) -> None:
        tag = secrets.token_hex(3)
        self.namespace, self._router = f"ako-silent-{tag}", f"ako-router-{tag}"
        self._host_end, self._router_up, self._router_down, self._worker_end = (
            f"aks{tag}{end}" for end in ("h", "u", "d", "w")
        )
        base = random.Random(tag).randrange(0, 1 << 13) * 8  # two /30s inside 10.214.0.0/16
        net = [f"10.214.{(base + i) >> 8}.{(base + i) & 0xFF}" for i in range(8)]
        worker_net, self.worker_ip, router_down_ip = f"{net[0]}/30", net[2], net[1]
        router_up_ip, self.host_ip = net[5], net[6]
        r, w = self._router, self.namespace
        try:
            _ip("netns", "add", r)
            _ip("netns", "add", w)
            _ip("link", "add", self._host_end, "type", "veth", "peer", "name", self._router_up)
            _ip("link", "set", self._router_up, "netns", r)
            _ip("-n", r, "link", "add", self._router_down, "type", "veth", "peer", "name", self._worker_end)
            _ip("-n", r, "link", "set", self._worker_end, "netns", w)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self._host_end)
            _ip("link", "set", self._host_end, "up")
            _ip("route", "add", worker_net, "via", router_up_ip)
            _ip("-n", r, "addr", "add", f"{router_up_ip}/30", "dev", self._router_up)
            _ip("-n", r, "addr", "add", f"{router_down_ip}/30", "dev", self._router_down)
            _ip("-n", r, "link", "set", self._router_up, "up")
            _ip("-n", r, "link", "set", self._router_down, "up")
            subprocess.run(["ip", "netns", "exec", r, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"], check=True)
            _ip("-n", w, "addr", "add", f"{self.worker_ip}/30", "dev", self._worker_end)
            _ip("-n", w, "link", "set", self._worker_end, "up")
            _ip("-n", w, "link", "set", "lo", "up")
            _ip("-n", w, "route", "add", "default", "via", router_down_ip)
            self.forwarder = Forwarder(self.host_ip, target)
        except BaseException:
            self.close()
            raise

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside the worker's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def drop(self) -> None:
        """From now on the router's kernel drops every packet it forwards, both ways (a queue of length 0)."""
        for end in (self._router_up, self._router_down):
            subprocess.run(
                ["tc", "-n", self._router, "qdisc", "add", "dev", end, "root", "pfifo", "limit", "0"], check=True
            )

    def drop_answers(self) -> None:
        """From now on the router's kernel drops every packet towards the worker (the server's answers and
        its TCP acknowledgments); the worker's packets still reach the server: a COMMIT sent now commits,
        and its sender never hears so."""
        subprocess.run(
            ["tc", "-n", self._router, "qdisc", "add", "dev", self._router_down, "root", "pfifo", "limit", "0"],
            check=True,
        )

    def close(self) -> None:
        if hasattr(self, "forwarder"):
            self.forwarder.close()
        subprocess.run(["ip", "link", "del", self._host_end], capture_output=True, check=False)  # its route too
        for namespace in (self.namespace, self._router):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)


@contextmanager
def silent_link(target: tuple[str, int]) -> Iterator[SilentLink]:
    link = SilentLink(target)
    try:
        yield link
    finally:
        link.close()
