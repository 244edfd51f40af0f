"""Which decoding a batch is planned and read with, and the sink checked for it before anything is planned.

A JSON pipeline's decoding is its spec's ``json_schema``. An Avro pipeline's (``value_format``) is a
reader schema from a schema registry, resolved when each batch is planned: the subject's latest
version, or the pinned one. It is recorded with the batch (``ledger.decodings``) and every read of
the batch uses the recorded one, never the registry's current latest, so a retry or a replay
decodes exactly as the first read did.

A reader schema that changed since the last batch follows the JSON path's rules for tables: a
table evolves by the fields it adds (at this plan), and any other change is refused before anything
is planned, naming both reader schemas.

First of all, an Iceberg table that someone else dropped or replaced since a batch committed to it is
refused (``core/output_tables.py``), before the sink check could create it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from airflow_kafka_offsets.clients.avro_registry import resolve_reader
from airflow_kafka_offsets.core.avro import column_changes
from airflow_kafka_offsets.core.merge import check_row, row_ddl
from airflow_kafka_offsets.core.model import DecodeSpec, PipelineSpec
from airflow_kafka_offsets.errors import (
    BatchStateError,
    ConfigurationError,
    InvalidPipelineSpecError,
    SchemaEvolutionError,
)
from airflow_kafka_offsets.ledger.port import LedgerPort, LedgerTransactionPort
from airflow_kafka_offsets.sinks import ChecksTables, Sink

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

log = logging.getLogger(__name__)

# A schema registry client for a connection id (SchemaRegistryHook(conn_id).get_conn() in Airflow).
RegistryClients = Callable[[str], "SchemaRegistryClient"]


def next_decode(
    ledger: LedgerPort, spec: PipelineSpec, sink: Sink, registry: RegistryClients | None = None
) -> DecodeSpec | None:
    """The decoding of the pipeline's next batch, the sink checked (created, evolved) for it.

    With a planned batch, that batch's recorded decoding (it is read with it). Otherwise, for Avro,
    the reader schema as the registry has it now (``registry`` opens the client of the
    value_format's connection). Refusals happen here, before the ledger is written.
    """
    check_output_tables(ledger, spec.name, sink)
    decode = spec.decode
    if decode is None or decode.avro is None:
        sink.check_writable(decode)
        return decode
    with ledger.transaction(read_only=True) as tx:
        planned = tx.planned_batch_id(spec.name)
        recorded = tx.batch_decode(spec.name, planned) if planned is not None else None
        previous = tx.last_recorded_decode(spec.name) if recorded is None else None
    if recorded is not None and recorded.avro == decode.avro:
        sink.check_writable(recorded)
        return recorded
    if registry is None:
        raise ConfigurationError(
            f"pipeline {spec.name!r} decodes Avro values: planning needs the schema registry of connection "
            f"{decode.avro.registry_conn_id!r}"
        )
    reader, columns = resolve_reader(registry(decode.avro.registry_conn_id), decode.avro, spec.name)
    resolved = replace(decode, schema=columns, reader=reader)
    merge = spec.sink.merge
    if merge is not None:  # a mirror's row and key, in the reader schema (Debezium: its envelope's after)
        try:
            row = row_ddl(columns, merge.changes, avro=True)
        except InvalidPipelineSpecError as exc:
            raise InvalidPipelineSpecError(
                f"pipeline {spec.name!r}: reader schema {reader.describe()}: {exc}"
            ) from None
        check_row(spec.name, merge.key, row, f"the reader schema {reader.describe()}")
    before = previous[1] if previous is not None else None
    changed = before is not None and before.reader is not None and before.reader.schema != reader.schema
    try:
        sink.check_writable(resolved)
    except SchemaEvolutionError as exc:
        if changed and before is not None and before.reader is not None:
            changes = "; ".join(column_changes(before.schema, columns)) or "see below"
            raise SchemaEvolutionError(
                f"pipeline {spec.name!r}: the reader schema changed from {before.reader.describe()} (batch "
                f"{previous[0] if previous else '?'}) to {reader.describe()} ({changes}), and the output cannot "
                f"follow: {exc}. Register a version that only adds fields (with defaults), or pin "
                "value_format.version"
            ) from None
        raise SchemaEvolutionError(
            f"pipeline {spec.name!r}: the reader schema {reader.describe()} does not fit the output: {exc}"
        ) from None
    if changed and before is not None and before.reader is not None:
        log.info(
            "pipeline %s: the reader schema is now %s (was %s)", spec.name, reader.describe(), before.reader.describe()
        )
    return resolved


def check_output_tables(ledger: LedgerPort, pipeline: str, sink: Sink) -> None:
    """Refuse a table of the sink that is no longer the one the pipeline's committed batches wrote to."""
    if not isinstance(sink, ChecksTables):
        return
    with ledger.transaction(read_only=True) as tx:
        recorded = tx.recorded_tables(pipeline)
    if recorded:
        sink.check_tables(recorded)


def batch_decoding(tx: LedgerTransactionPort, spec: PipelineSpec, batch_id: int) -> DecodeSpec | None:
    """What batch ``batch_id`` is read (and its empty output written) with: its recorded decoding, else
    the spec's. An Avro spec without a recorded reader schema (a batch planned before the pipeline
    decoded Avro) cannot be read as Avro: refused."""
    recorded = tx.batch_decode(spec.name, batch_id)
    if recorded is not None:
        return recorded
    if spec.decode is not None and spec.decode.avro is not None:
        raise BatchStateError(
            f"batch {batch_id} of pipeline {spec.name!r} was planned without a reader schema (before the pipeline "
            "decoded Avro values), so it cannot be read as Avro; it keeps the output it was committed with"
        )
    return spec.decode
