"""Avro values for ``scripts/faults --avro``: what the trial's topic carries and what must come out.

The topic's subject (``<topic>-value``, compatibility ``BACKWARD``) gets three writer versions,
each adding a field with a default; records are written by confluent-kafka's ``AvroSerializer``
(a ``SchemaRegistryClient`` on the stack's registry), each with one of the three versions in turn.
Every wave also carries, per partition, one record no serializer would write: a wrong magic byte,
an unknown schema id, or a truncated payload, in turn. The pipeline reads with the subject's latest
version (the third), so every record written with an older one must land with the reader's
defaults, and every corrupted one must be kept with its offset and why.

:func:`problems` checks that against what a reader of the sink sees: the ``decoded`` struct and
``decode_error`` of every row, and for directories the batch's ``_errors/`` output too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from airflow_kafka_offsets.core.model import PipelineSpec, SinkFormat
from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.readers import committed_outputs
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, object_storage
from airflow_kafka_offsets.sinks.manifest import ManifestDirectorySink

FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "string"},
    {"name": "n", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},  # version 2's
    {"name": "channel", "type": "string", "default": "web"},  # version 3's
]
VERSIONS = [{"type": "record", "name": "Event", "namespace": "faults", "fields": FIELDS[: 2 + v]} for v in range(3)]
READER_DEFAULTS = {"note": None, "channel": "web"}  # what the reader (version 3) gives older records
UNKNOWN_ID = 2_000_000_000
# The decode_error texts the package documents for each kind of corrupted record.
UNKNOWN_MAGIC = "unknown magic byte 0x01 (the Confluent wire format starts with 0x00)"
UNKNOWN_SCHEMA = f"unknown schema id {UNKNOWN_ID} (the schema registry does not have it)"


def undecodable(schema_id: int) -> str:
    return f"payload does not decode with writer schema id {schema_id} into the reader schema"


@dataclass(frozen=True)
class Value:
    """A record's value bytes, and what a reader must find for it: its decoded fields, or its error."""

    value: bytes
    decoded: dict[str, Any] | None
    error: str | None


class AvroValues:
    """The trial topic's subject and serializers; :meth:`good` and :meth:`corrupted` make values."""

    def __init__(self, registry_config: dict[str, str], topic: str) -> None:
        self.subject = f"{topic}-value"
        self.client = SchemaRegistryClient({**registry_config, "timeout": REQUEST_TIMEOUT_S})
        self.client.set_compatibility(subject_name=self.subject, level="BACKWARD")
        self.ids = [int(self.client.register_schema(self.subject, Schema(json.dumps(v), "AVRO"))) for v in VERSIONS]
        conf = {"auto.register.schemas": False, "use.latest.version": False}
        self.serializers = [AvroSerializer(self.client, json.dumps(v), conf=conf) for v in VERSIONS]
        self.context = SerializationContext(topic, MessageField.VALUE)
        self.corrupted_made = 0

    @property
    def value_format(self) -> dict[str, str]:
        """The plan step's ``value_format``: the subject's latest version read through the stack's registry."""
        return {"type": "avro", "subject": self.subject}

    def good(self, rid: str, n: int) -> Value:
        """Record ``n`` of a wave, written with writer version ``n % 3 + 1``."""
        version = n % 3
        record: dict[str, Any] = {"id": rid, "n": n}
        if version >= 1:
            record["note"] = f"note-{n}" if n % 2 else None
        if version >= 2:
            record["channel"] = f"app-{n}"
        return Value(self.serializers[version](record, self.context), {**READER_DEFAULTS, **record}, None)

    def corrupted(self, rid: str) -> Value:
        """A value no serializer would write: a wrong magic byte, an unknown schema id, a truncated payload."""
        kind = self.corrupted_made % 3
        self.corrupted_made += 1
        good = self.serializers[0]({"id": rid, "n": -1}, self.context)
        if kind == 0:
            return Value(b"\x01" + good[1:], None, UNKNOWN_MAGIC)
        if kind == 1:
            return Value(b"\x00" + UNKNOWN_ID.to_bytes(4, "big") + good[5:], None, UNKNOWN_SCHEMA)
        return Value(good[:6], None, undecodable(self.ids[0]))


def problems(
    rows: list[dict[str, Any]],
    produced: list[dict[str, Any]],
    sink: SinkFormat,
    errors_rows: list[dict[str, Any]],
    keep_raw_value: bool = True,
) -> list[str]:
    """What differs between the rows a reader sees and the values produced: each row's ``decoded`` (typed:
    ``n`` an int, the reader's defaults for older writers), ``decode_error`` and whether it has its ``value``
    (every row, or with ``keep_raw_value`` False only the corrupted ones); for directories, the
    batches' ``_errors/`` rows must be exactly the corrupted records, at their offsets."""
    expected = {p["id"]: p for p in produced}
    found = []
    for row in rows:
        want = expected.get(row["key"].decode())
        if want is None:
            continue  # verify counts it as unexpected
        if row.get("decode_error") != want["error"]:
            found.append(f"{want['id']} at offset {row['offset']}: decode_error {row.get('decode_error')!r}")
        elif row.get("decoded") != want["decoded"]:
            found.append(f"{want['id']} at offset {row['offset']}: decoded {row.get('decoded')!r}")
        elif (row.get("value") is not None) != (keep_raw_value or want["error"] is not None):
            found.append(f"{want['id']} at offset {row['offset']}: value {'kept' if row.get('value') else 'missing'}")
    if sink is SinkFormat.DIRECTORY:
        bad = sorted((p["partition"], p["offset"], p["error"]) for p in produced if p["error"])
        kept = sorted((int(r["partition"]), int(r["offset"]), r["decode_error"]) for r in errors_rows)
        if kept != bad:
            missing, extra = sorted(set(bad) - set(kept)), sorted(set(kept) - set(bad))
            found.append(f"the _errors output differs: missing {missing[:3]}, not expected {extra[:3]}")
    return found[:10] + ([f"... {len(found) - 10} more"] if len(found) > 10 else [])


def errors_output(ledger: Ledger, spec: PipelineSpec) -> list[dict[str, Any]]:
    """The rows of the committed batches' ``_errors/`` (a directory sink's): ``batch=<N>/_errors/`` on disk;
    on S3, where a batch is published by its ``_manifest``, beside the files of the attempt it names."""
    sink = AIRFLOW_SINKS.for_spec(ledger, spec)
    storage = files.Storage(object_storage(spec.output_root))
    rows: list[dict[str, Any]] = []
    for output in committed_outputs(ledger, spec.name):
        where = output.uri
        if isinstance(sink, ManifestDirectorySink):
            manifest = sink.read_manifest(output.uri)
            if manifest is None:
                continue  # verify reports the batch's missing manifest
            where = sink.staging_uri(spec.name, output.batch_id, manifest.attempt_id)
        fs, path = storage.filesystem(files.join(where, "_errors"))
        if fs.get_file_info(path).type == pafs.FileType.Directory:
            table = pq.read_table(path, filesystem=fs)
            rows += table.select(["partition", "offset", "decode_error"]).to_pylist()
    return rows
