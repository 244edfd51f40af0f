"""A client of toxiproxy's HTTP API (stdlib only): the proxies the stack puts in front of its services,
and the toxics a test adds to them and removes again.

Values that cross the API are frozen dataclasses; :meth:`Toxic.body` and :meth:`Proxy.body` are what
``POST /proxies/<name>/toxics`` and ``POST /populate`` take. A toxic's ``stream`` is ``downstream``
(the server's answers on their way to the client) or ``upstream`` (the client's requests).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from .errors import StackError

STREAMS = ("upstream", "downstream")
# The toxic types of toxiproxy 2.5 and the attributes each takes (milliseconds, bytes or KB/s).
TOXIC_ATTRIBUTES: dict[str, frozenset[str]] = {
    "latency": frozenset({"latency", "jitter"}),
    "bandwidth": frozenset({"rate"}),
    "slow_close": frozenset({"delay"}),
    "timeout": frozenset({"timeout"}),
    "reset_peer": frozenset({"timeout"}),
    "slicer": frozenset({"average_size", "size_variation", "delay"}),
    "limit_data": frozenset({"bytes"}),
}


@dataclass(frozen=True)
class Proxy:
    """A listening port on loopback relayed to one service's ``upstream`` ``host:port``."""

    name: str
    listen_port: int
    upstream: str
    enabled: bool = True

    @property
    def listen(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    def body(self) -> dict[str, Any]:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": self.enabled}


@dataclass(frozen=True)
class Toxic:
    """One toxic: ``type`` with its ``attributes`` on one ``stream`` of a proxy's connections."""

    name: str
    type: str
    stream: str = "downstream"
    attributes: dict[str, int] = field(default_factory=dict)
    toxicity: float = 1.0

    def __post_init__(self) -> None:
        if self.type not in TOXIC_ATTRIBUTES:
            raise ValueError(f"unknown toxic type {self.type!r}; known: {', '.join(TOXIC_ATTRIBUTES)}")
        if self.stream not in STREAMS:
            raise ValueError(f"a toxic's stream is upstream or downstream, not {self.stream!r}")
        unknown = set(self.attributes) - TOXIC_ATTRIBUTES[self.type]
        if unknown:
            raise ValueError(f"toxic {self.type} takes {sorted(TOXIC_ATTRIBUTES[self.type])}, not {sorted(unknown)}")
        if not 0.0 <= self.toxicity <= 1.0:
            raise ValueError(f"toxicity is a probability, not {self.toxicity}")

    def body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }


def both_ways(name: str, type_: str, **attributes: int) -> list[Toxic]:
    """The same toxic on both streams (a partition, a slow link both ways), named ``<name>_up``/``_down``."""
    return [Toxic(f"{name}_{stream.removesuffix('stream')}", type_, stream, attributes) for stream in STREAMS]


@dataclass(frozen=True)
class Client:
    """toxiproxy's API at ``url`` (``http://127.0.0.1:<port>``)."""

    url: str
    timeout_s: float = 10.0

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raise StackError(
                f"toxiproxy {method} {path}: HTTP {exc.code} {exc.read().decode(errors='replace')}"
            ) from None
        except OSError as exc:
            raise StackError(f"toxiproxy at {self.url} did not answer {method} {path}: {exc}") from None
        return json.loads(raw) if raw.strip() else None

    def version(self) -> str:
        request = urllib.request.Request(self.url + "/version")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
            return str(answer.read().decode().strip())

    def populate(self, proxies: list[Proxy]) -> None:
        """Create the proxies, or update the ones that exist (``POST /populate``)."""
        self._call("POST", "/populate", [p.body() for p in proxies])

    def proxies(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/proxies")
        return result

    def add(self, proxy: str, toxic: Toxic) -> None:
        self._call("POST", f"/proxies/{proxy}/toxics", toxic.body())

    def remove(self, proxy: str, toxic: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}")

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        """Disable: the proxy stops listening and closes every connection (clients see resets and refusals)."""
        self._call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    def reset(self) -> None:
        """Every proxy enabled, every toxic removed (``POST /reset``): the links healed."""
        self._call("POST", "/reset")
