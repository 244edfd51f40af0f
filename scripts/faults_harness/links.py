"""The workers' links through the stack's fault proxy (``scripts/faults --network``): toxiproxy's API and
the Airflow connections that reach each service through it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from devstack.toxiproxy_api import Client, Toxic


@dataclass(frozen=True)
class Links:
    """toxiproxy's ``client`` and ``env``: the workers' Airflow connections through the proxies."""

    client: Client
    env: dict[str, str]

    def ledger_connection(self, **extra: Any) -> str:
        """The ledger's connection through its proxy, with ``extra`` (deadlines) in its extra."""
        connection = json.loads(self.env["AIRFLOW_CONN_POSTGRES_DEFAULT"])
        return json.dumps(connection | {"extra": {**connection.get("extra", {}), **extra}})

    def add(self, proxy: str, toxics: list[Toxic]) -> None:
        for toxic in toxics:
            self.client.add(proxy, toxic)

    def heal(self) -> None:
        """Every proxy enabled again, every toxic gone."""
        self.client.reset()
