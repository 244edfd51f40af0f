"""What each sink format takes and needs, in one table: the spec's checks (:func:`core.spec.build_sink`),
the sinks' openers (:data:`airflow_kafka_offsets.sinks.OPENERS`) and the error that names the
install extra all read it. A new format is a :class:`SinkFormat` member, a row here and an opener.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_kafka_offsets.core.model import SinkFormat


@dataclass(frozen=True)
class SinkFormatRules:
    """``table``: output is a table named by the spec's ``table`` (and may be partitioned); else a
    directory per batch. ``namespace``: that name needs one ('analytics.events'). ``catalog_conn``:
    takes ``catalog_conn_id``. ``many_tables``: takes ``tables``/``route`` instead of ``table``, many
    tables fed by one pipeline (:mod:`airflow_kafka_offsets.sinks.multi`, opened by
    :data:`airflow_kafka_offsets.sinks.MULTI_TABLE_OPENER`). ``merge``: takes ``merge_key``, a mirror
    table (:mod:`airflow_kafka_offsets.core.merge`). ``extra``: the pip extra installing the libraries its
    commits use."""

    title: str
    table: bool = False
    namespace: bool = False
    catalog_conn: bool = False
    many_tables: bool = False
    merge: bool = False
    extra: str | None = None


SINK_FORMATS: Mapping[SinkFormat, SinkFormatRules] = {
    SinkFormat.DIRECTORY: SinkFormatRules("directory"),
    SinkFormat.ICEBERG: SinkFormatRules(
        "Iceberg", table=True, namespace=True, catalog_conn=True, many_tables=True, merge=True, extra="iceberg"
    ),
    SinkFormat.DELTA: SinkFormatRules("Delta", table=True, many_tables=True, merge=True, extra="delta"),
}
