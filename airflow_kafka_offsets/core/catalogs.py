"""Where an Iceberg sink's catalog is when it is not the ledger's: a value that crosses from the Airflow
connection (hooks) to the sink, which reads no Airflow connection itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

REST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class RestCatalogConfig:
    """An Iceberg REST catalog: PyIceberg ``RestCatalog`` properties read from connection ``conn_id``
    (they hold its secrets: kept out of the repr, never logged)."""

    conn_id: str
    uri: str
    properties: Mapping[str, str] = field(repr=False)
    timeout_s: float = REST_TIMEOUT_S
    """Seconds each request to the catalog may take (PyIceberg sets none: a silent catalog would hold the
    worker forever)."""


# An Iceberg catalog outside the ledger's: a SQL catalog's database (a SQLAlchemy URL) or a REST catalog.
ExternalCatalog = str | RestCatalogConfig
