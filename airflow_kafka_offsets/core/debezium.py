"""Debezium's envelope decoded from Avro: the row a mirror table holds, read from the reader schema.

Pure. A JSON pipeline names the row's columns itself (``json_schema``) and the package wraps them in the
envelope. An Avro pipeline's reader schema is the envelope Debezium's converter registered (``before`` and
``after`` the row as a nullable record, ``op``, ``source`` with ``lsn`` / ``ts_ms``, ``ts_ms``,
``transaction``), so the row is ``after``'s record, checked here when a batch is planned: an envelope the
merge could not read is refused before anything is planned.
"""

from __future__ import annotations

from airflow_kafka_offsets.core.ddl import DdlType, parse_ddl, render_ddl
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


class EnvelopeError(InvalidPipelineSpecError):
    """A reader schema that is not a Debezium envelope the merge reads; the message says which part."""


def envelope_row_ddl(envelope_ddl: str) -> str:
    """The row's columns (Spark DDL) of a Debezium envelope whose decoded columns are ``envelope_ddl``:
    ``after``'s record, which ``before`` must share; ``op`` must be a string and ``source``, when present,
    a record."""
    fields = {f.name: f.type for f in parse_ddl(envelope_ddl)}
    missing = [name for name in ("op", "after") if name not in fields]
    if missing:
        raise EnvelopeError(
            f"the reader schema is not a Debezium envelope: it has no {' and no '.join(missing)} field "
            f"(its fields: {', '.join(fields)}); give value_format the subject of Debezium's value schema"
        )
    if fields["op"].kind != "string":
        raise EnvelopeError(f"the envelope's op is a {fields['op'].kind}, not a string")
    after = fields["after"]
    if after.kind != "struct" or not after.children:
        raise EnvelopeError(f"the envelope's after is a {after.kind}, not a record of the row's columns")
    before = fields.get("before")
    if before is not None and before != after:
        raise EnvelopeError("the envelope's before and after are different records: the merge needs one row type")
    source = fields.get("source", DdlType("struct"))
    if source.kind != "struct":
        raise EnvelopeError(f"the envelope's source is a {source.kind}, not a record")
    return render_ddl(after.children)
