"""The Spark app's merge step: a batch's change events into its change set, the last change per key.

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
The rules are the package's ``core/merge.py`` (``changes_of``, ``last_changes``) in Spark SQL:

- Debezium (``decoded`` is the envelope: JSON's ``kafka_batch_contract.debezium_envelope_ddl``, or the Avro
  reader schema Debezium's converter registered, without ``payload``; ``source`` has ``lsn`` (PostgreSQL) or
  ``file`` / ``pos`` (MySQL), whichever it has is read): c, r and u put
  ``after``; d deletes ``before``'s key; an update whose ``before`` holds another key deletes it first;
  tombstones and other ops (t, m) change nothing.
- upsert (``decoded`` is the row, from JSON or Avro): the value puts the row; a tombstone deletes the key read
  from the record key (:func:`tombstone_key`); a record key in Avro's wire format is decoded by its writer
  schema, fetched from the job's schema registry (:func:`avro_key_writers`).

Per key the change with the highest (offset, order, partition) wins: a key's events share one partition.
Records that did not decode change nothing (the batch's ``max_decode_errors`` decides whether it commits).
"""

from __future__ import annotations

import json

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

if __package__:
    from . import kafka_batch_avro as avro
    from . import kafka_batch_contract as contract
    from .kafka_batch_decode import header_of
else:
    import kafka_batch_avro as avro
    import kafka_batch_contract as contract
    from kafka_batch_decode import header_of

ORDER = "_order"


def _row_fields(df: DataFrame, image: str) -> list[str]:
    return [f.name for f in df.schema[image].dataType.fields]


def _same_key(left: list[Column], right: list[Column]) -> Column:
    same = F.lit(True)
    for a, b in zip(left, right, strict=True):
        same = same & a.eqNullSafe(b)
    return same


def _key_present(columns: list[Column]) -> Column:
    present = F.lit(True)
    for c in columns:
        present = present & c.isNotNull()
    return present


def _field(struct: Column, struct_type: DataType | None, name: str, cast: str) -> Column:
    """``struct[name]`` cast to ``cast``, or a null of it when the struct has no such field (an Avro envelope
    has only the fields its connector writes)."""
    if isinstance(struct_type, StructType) and name in struct_type.fieldNames():
        return struct[name].cast(cast)
    return F.lit(None).cast(cast)


def _debezium_changes(records: DataFrame, key: list[str]) -> DataFrame:
    """One row per change: ``_key_<i>``, the row image (``row``), op, order, deleted, position, ts_ms."""
    decoded_type = records.schema["decoded"].dataType
    envelope = F.col("decoded")
    if "payload" in decoded_type.fieldNames():  # JSON: with its embedded schema, or without
        envelope = F.when(F.col("decoded.payload").isNotNull(), F.col("decoded.payload")).otherwise(
            F.col("decoded").dropFields("payload")
        )
    events = records.where(F.col("value").isNotNull() & F.col("decode_error").isNull()).select(
        F.col("partition"), F.col("offset"), envelope.alias("e")
    )
    events = events.where(F.col("e.op").isin("c", "u", "d", "r"))
    envelope_type = events.schema["e"].dataType
    source = F.col("e.source")
    source_type = envelope_type["source"].dataType if "source" in envelope_type.fieldNames() else None
    file = _field(source, source_type, "file", "string")
    position = F.coalesce(
        _field(source, source_type, "lsn", "string"),
        F.when(file.isNotNull(), F.concat_ws(":", file, _field(source, source_type, "pos", "string"))),
    )
    ts_ms = F.coalesce(
        _field(source, source_type, "ts_ms", "bigint"), _field(F.col("e"), envelope_type, "ts_ms", "bigint")
    )
    after = [F.col("e.after")[k] for k in key]
    before = [F.col("e.before")[k] for k in key]
    deleting = F.col("e.op") == "d"
    common = [F.col("partition"), F.col("offset"), position.alias("position"), ts_ms.alias("ts_ms")]
    main = events.select(
        *[F.when(deleting, b).otherwise(a).alias(f"_key_{i}") for i, (a, b) in enumerate(zip(after, before))],
        F.when(~deleting, F.col("e.after")).alias("row"),
        F.col("e.op").alias("op"),
        F.lit(1).alias(ORDER),
        deleting.alias("deleted"),
        *common,
    )
    moved = events.where(
        (F.col("e.op") == "u") & _key_present(before) & _key_present(after) & ~_same_key(before, after)
    ).select(
        *[b.alias(f"_key_{i}") for i, b in enumerate(before)],
        F.lit(None).cast(events.schema["e"].dataType["after"].dataType).alias("row"),
        F.lit("d").alias("op"),
        F.lit(0).alias(ORDER),
        F.lit(True).alias("deleted"),
        *common,
    )
    return main.unionByName(moved)


# A record key in the Confluent wire format (magic byte 0, then a 4-byte schema id): Avro, decoded by its writer
# schema when the job has a schema registry (an Avro pipeline's), else not read as a key.
AVRO_WIRE_KEY = f"substring(key, 1, 1) = X'{avro.MAGIC_BYTE:02X}' AND length(key) >= {avro.WIRE_HEADER_BYTES}"
KEY_SCHEMA_ID = "CAST(conv(hex(substring(key, 2, 4)), 16, 10) AS BIGINT)"
KEY_HEADER = f"substring(key, 1, {avro.WIRE_HEADER_BYTES})"
KEY_PAYLOAD = f"substring(key, {avro.WIRE_HEADER_BYTES + 1})"
UPSERT_KEYS = (
    "an upsert's tombstone names its row by the record key: a JSON object of the key columns (or Kafka "
    'Connect\'s {"schema": ..., "payload": {...}}), for a one-column merge_key the key itself as a string or '
    "a JSON scalar, or, in a pipeline of Avro values, a key in Avro's wire format (a record whose fields are "
    "named like the key columns, or for a one-column merge_key a primitive), decoded by its writer schema from "
    "the schema registry"
)


def avro_key_writers(written: DataFrame, job: dict) -> tuple[dict[int, str], set[int]]:
    """The writer schemas of the tombstones' record keys in Avro's wire format, fetched from the job's schema
    registry (an Avro pipeline's; none without one), and the ids it has no Avro schema for. One pass over
    the batch's tombstones' keys, and none when the job has no registry."""
    access = job.get(contract.REGISTRY_ACCESS)
    if not access:
        return {}, set()
    tombstones = written.where(F.col("value").isNull() & F.expr(AVRO_WIRE_KEY))
    ids = [int(row[0]) for row in tombstones.select(F.expr(KEY_SCHEMA_ID)).distinct().collect()]
    if not ids:
        return {}, set()
    writers, _other, _unknown = avro.fetch_writer_schemas(access, ids)
    return writers, set(ids) - set(writers)


def _avro_key_column(name: str, one_column: bool, writers: dict[int, str]) -> Column | None:
    """Key column ``name`` of a record key in Avro's wire format, picked by its writer schema: a record's field
    of that name, or for a one-column key a primitive key itself; null for any other key (None: no writer
    gives it)."""
    from pyspark.sql.avro.functions import from_avro

    column: Column | None = None
    for writer_id, writer in sorted(writers.items()):
        shape = json.loads(writer)
        record = isinstance(shape, dict) and shape.get("type") == "record"
        if (record and name not in [f.get("name") for f in shape.get("fields", [])]) or (not record and not one_column):
            continue
        parsed = from_avro(F.expr(KEY_PAYLOAD), writer, {"mode": "PERMISSIVE"})
        value = parsed[name] if record else parsed
        mine = F.expr(KEY_HEADER) == header_of(writer_id)
        column = F.when(mine, value) if column is None else column.when(mine, value)
    return column


def tombstone_key(row_type: StructType, key: list[str], key_writers: dict[int, str] | None = None) -> list[Column]:
    """The key columns a tombstone deletes, from its record key (see ``UPSERT_KEYS``); null where the key does
    not give them, which fails the batch (:func:`write_changes`). ``key_writers``: the Avro writer schemas of
    the keys in Avro's wire format, by id."""
    key_ddl = ", ".join(f"`{k}` {row_type[k].dataType.simpleString()}" for k in key)
    text = F.col("key").cast("string")
    is_object = F.ltrim(text).startswith("{")
    parsed = F.from_json(text, f"{key_ddl}, payload STRUCT<{key_ddl}>")
    columns = [F.when(is_object, F.coalesce(parsed["payload"][k], parsed[k])) for k in key]
    if len(key) == 1:
        scalar = F.coalesce(F.get_json_object(text, "$"), text)  # "abc" and 42 as JSON, or abc as is
        readable = ~is_object & ~F.expr(AVRO_WIRE_KEY)
        columns = [F.coalesce(columns[0], F.when(readable, scalar.cast(row_type[key[0]].dataType)))]
    avro_wire = F.expr(AVRO_WIRE_KEY)
    for i, k in enumerate(key):
        from_key = _avro_key_column(k, len(key) == 1, key_writers or {})
        if from_key is not None:
            columns[i] = F.when(avro_wire, from_key.cast(row_type[k].dataType)).otherwise(columns[i])
    return columns


def _upsert_changes(records: DataFrame, key: list[str], key_writers: dict[int, str]) -> DataFrame:
    tombstone = F.col("value").isNull()
    deleted_key = tombstone_key(records.schema["decoded"].dataType, key, key_writers)
    events = records.where(tombstone | F.col("decode_error").isNull())
    return events.select(
        *[
            F.when(tombstone, deleted).otherwise(F.col("decoded")[k]).alias(f"_key_{i}")
            for i, (k, deleted) in enumerate(zip(key, deleted_key, strict=True))
        ],
        F.when(~tombstone, F.col("decoded")).alias("row"),
        F.when(tombstone, F.lit("d")).otherwise(F.lit("u")).alias("op"),
        F.lit(1).alias(ORDER),
        tombstone.alias("deleted"),
        F.col("partition"),
        F.col("offset"),
        F.lit(None).cast("string").alias("position"),
        F.expr("unix_millis(timestamp)").alias("ts_ms"),
    )


def change_set(records: DataFrame, merge: dict, key_writers: dict[int, str] | None = None) -> DataFrame:
    """The batch's last change per key: the row's columns (null but the key for a delete), where the change
    came from (``_kafka_partition``, ``_kafka_offset``, ``_source_position``, ``_source_ts_ms``), its ``_op``
    and ``_deleted``. Changes whose key has a null column are kept with it, for the app to refuse.
    ``key_writers``: the writer schemas of upsert tombstones' keys in Avro's wire format (:func:`avro_key_writers`)."""
    key = list(merge["key"])
    debezium = merge["changes"] == "debezium"
    changes = _debezium_changes(records, key) if debezium else _upsert_changes(records, key, key_writers or {})
    keys = [F.col(f"_key_{i}") for i in range(len(key))]
    latest = Window.partitionBy(*keys).orderBy(F.desc("offset"), F.desc(ORDER), F.desc("partition"))
    last = changes.withColumn("_rank", F.row_number().over(latest)).where(F.col("_rank") == 1)
    row_type = (records.schema["decoded"].dataType["after"] if debezium else records.schema["decoded"]).dataType
    columns = [
        (F.col(f"_key_{key.index(f.name)}") if f.name in key else F.col("row")[f.name]).alias(f.name)
        for f in row_type.fields
    ]
    return last.select(
        *columns,
        F.col("partition").cast("int").alias(contract.KAFKA_PARTITION),
        F.col("offset").cast("long").alias(contract.KAFKA_OFFSET),
        F.col("position").alias(contract.SOURCE_POSITION),
        F.col("ts_ms").cast("long").alias(contract.SOURCE_TS_MS),
        F.col("op").alias(contract.CHANGE_OP),
        F.col("deleted").alias(contract.DELETED),
    )


def write_changes(written: DataFrame, job: dict) -> dict:
    """Write the change set to ``<staging_uri>/_changes/``; its counts for the report (observed while it is
    written: no pass of their own). A change whose key has a null column fails the batch (the mirror could
    not tell which row it changes)."""
    from pyspark.sql import Observation

    merge = job["merge"]
    upsert = merge["changes"] == "upsert"
    key_writers, unknown_key_ids = avro_key_writers(written, job) if upsert else ({}, set())
    null_key = F.lit(False)
    for k in merge["key"]:
        null_key = null_key | F.col(k).isNull()
    observation = Observation("kafka_offsets_changes")
    changes = change_set(written, merge, key_writers).observe(
        observation,
        F.count(F.lit(1)).alias("changes"),
        F.coalesce(F.sum(F.col(contract.DELETED).cast("long")), F.lit(0)).alias("deletes"),
        F.coalesce(F.sum(null_key.cast("long")), F.lit(0)).alias("null_keys"),
    )
    changes.write.mode("overwrite").parquet(job["staging_uri"].rstrip("/") + "/" + contract.CHANGES_DIR)
    counts = observation.get
    if counts["null_keys"]:
        raise ValueError(
            f"{counts['null_keys']} change events have no value for a key column ({', '.join(merge['key'])}): "
            "the mirror cannot tell which row they change"
            + (f" ({UPSERT_KEYS})" if upsert else "")
            + (
                f"; the schema registry has no Avro schema for the key schema id(s) {sorted(unknown_key_ids)}"
                if unknown_key_ids
                else ""
            )
        )
    return {"changes": int(counts["changes"]), "deletes": int(counts["deletes"])}
