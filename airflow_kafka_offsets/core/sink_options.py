"""The sink's options (the ``sink`` argument's keys), declared once: :func:`~airflow_kafka_offsets.core.spec.build_sink`
takes exactly these, and the docs' table is written from them (``scripts/option_tables.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.merge import ChangeFormat
from airflow_kafka_offsets.core.options import option

_CHANGES = tuple(str(c.value) for c in ChangeFormat)


@dataclass(frozen=True)
class SinkOptions:
    """What the ``sink`` argument's dictionary may hold (a plain format name stands for ``{"format": name}``)."""

    format: str = option("directory", "`directory`, `iceberg` or `delta`", choices=("directory", "iceberg", "delta"))
    table: str | None = option(None, "the table: `namespace.name` for Iceberg, a name under `output_root` for Delta")
    partition_by: str | None = option(None, "`day`: partition a table by the UTC day of the record timestamp")
    catalog_conn_id: str | None = option(
        None,
        "Iceberg: another catalog, a REST catalog or a SQL catalog in another PostgreSQL database "
        "([Sinks](sinks.md#tables-apache-iceberg-and-delta-lake))",
    )
    tables: Mapping[str, str] | None = option(
        None, "many tables: `{topic: table}` ([Sinks](sinks.md#many-tables-from-one-pipeline))"
    )
    route: Mapping[str, Any] | None = option(
        None, "many tables: route by a header ([Sinks](sinks.md#many-tables-from-one-pipeline))"
    )
    merge_key: Sequence[str] | str | None = option(
        None,
        "merge mode (Iceberg or Delta): the key columns of the decoded row, a list or comma-separated; the table then "
        "mirrors the source table ([Sinks](sinks.md#mirror-tables-change-data-capture))",
    )
    changes: str | None = option(
        None,
        "with `merge_key`: how records describe changes, `debezium` (Debezium's envelope) or `upsert` (the value "
        "is the row, a tombstone deletes it)",
        default_doc="`debezium`",
        choices=_CHANGES,
    )
