"""The Spark app's decode step: JSON values parsed with the job's DDL schema, or Avro values of the Confluent
wire format decoded by their writer schemas (fetched from the schema registry) into the reader schema's shape.

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): the contract modules are its siblings
    from . import kafka_batch_avro as avro
    from . import kafka_batch_contract as contract
else:  # spark-submit ships them beside this file (--py-files)
    import kafka_batch_avro as avro
    import kafka_batch_contract as contract

CORRUPT = "_corrupt_record"
# How to get a write's key + value bytes per range after it ran (None: the read-back counts them).
Payload = Callable[[], dict] | None
# The app's write of staged records: the frame written and its Payload.
Write = Callable[[DataFrame, dict], tuple[DataFrame, Payload]]


def utf8_check(spark_version: str) -> str:
    """A SQL expression true when ``value`` is valid UTF-8. ``is_valid_utf8`` is Spark 4's; on Spark 3
    a string cast keeps the bytes and encoding it back replaces invalid ones, so the bytes differ."""
    if int(contract.spark_release(spark_version).split(".")[0]) >= 4:
        return "is_valid_utf8(CAST(value AS STRING))"
    return "encode(CAST(value AS STRING), 'UTF-8') = value"


def with_decoded(df: DataFrame, schema: str, spark_version: str) -> DataFrame:
    """Add ``decoded`` (the value parsed as JSON with ``schema``) and ``decode_error`` (why not).

    The raw ``value`` stays untouched; a tombstone (null value) is not an error.
    """
    parsed = F.from_json(
        F.col("value").cast("string"),
        f"{schema}, `{CORRUPT}` STRING",
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT},
    )
    error = (
        F.when(F.col("value").isNull(), F.lit(None))
        .when(~F.expr(utf8_check(spark_version)), F.lit("value is not valid UTF-8"))
        .when(parsed.isNull(), F.lit("value is not a JSON object"))
        .when(parsed[CORRUPT].isNotNull(), F.lit("value does not match the JSON schema"))
    )
    return (
        df.withColumn("_parsed", parsed)
        .withColumn("decode_error", error)
        .withColumn("decoded", F.when(F.col("decode_error").isNull(), F.col("_parsed").dropFields(CORRUPT)))
        .drop("_parsed")
    )


# Avro in the Confluent wire format, as Spark SQL over the binary ``value``.
SCHEMA_ID = "CAST(conv(hex(substring(value, 2, 4)), 16, 10) AS BIGINT)"
PAYLOAD = f"substring(value, {avro.WIRE_HEADER_BYTES + 1})"
# The magic byte and the id as bytes: a record's writer is picked by comparing its first 5 bytes with each
# known header, without turning every record's id into a number (SCHEMA_ID: only for the error's text).
HEADER = f"substring(value, 1, {avro.WIRE_HEADER_BYTES})"
# A record whose writer schema is named by GUID in a header (Confluent's header form: not read, kept as an error).
# (array_contains, not exists with a lambda: Spark generates code for it, not for higher-order functions)
GUID_HEADER = f"coalesce(array_contains(headers.key, '{avro.GUID_HEADER}'), false)"


def header_of(schema_id: int) -> Column:
    """The first bytes of a value written with writer schema ``schema_id`` (see HEADER)."""
    return F.lit(bytearray(bytes([avro.MAGIC_BYTE]) + int(schema_id).to_bytes(4, "big")))


def _text(prefix_suffix: tuple[str, str], middle: Column) -> Column:
    return F.concat(F.lit(prefix_suffix[0]), middle, F.lit(prefix_suffix[1]))


class AvroWriters:
    """The writer schemas an Avro batch decodes with, fetched from the registry on the driver (or the Connect
    client).

    Up front, the reader subject's newest versions: a few requests, no pass over the records. A record whose
    id is not among them gets "unknown schema id" in the first write, which counts those ids as it goes
    (:func:`late_writer_ids`); :meth:`learn` then asks the registry for them, and when it knows one the batch
    is written again with it, so the output is what decoding with every id known up front gives.
    """

    def __init__(
        self,
        registry: dict,
        subject: str,
        fetch_subject: Callable[..., tuple] = avro.fetch_subject_writer_schemas,
        fetch_ids: Callable[..., tuple] = avro.fetch_writer_schemas,
    ) -> None:
        self.registry = registry
        self.fetch_ids = fetch_ids
        self.avro, self.other = fetch_subject(registry, subject)
        self.asked = set(self.avro) | set(self.other)

    def learn(self, seen: Iterable[int]) -> bool:
        """Fetch the ids records carried that were not asked for yet; True when the registry knows one of them."""
        new = {int(i) for i in seen} - self.asked
        if not new:
            return False
        avro, other, _unknown = self.fetch_ids(self.registry, new)
        self.asked |= new
        self.avro.update(avro)
        self.other.update(other)
        return bool(avro or other)


def late_writer_ids(df: DataFrame) -> tuple[DataFrame, Callable[[], list[int]]]:
    """``df`` counting, while it is written, the writer schema ids its records carry that the decode did not
    know (an observed metric: no pass of its own), and how to get them after the write."""
    from pyspark.sql import Observation

    observation = Observation("kafka_offsets_late_writer_ids")
    unknown = F.col("decode_error").startswith(avro.UNKNOWN_SCHEMA_ID[0])
    # as text: Spark 3.5 and 4.0's classic Observation hands an array back as a Java object
    ids = F.array_join(F.collect_set(F.when(unknown, F.expr(SCHEMA_ID).cast("string"))), ",")
    observed = df.observe(observation, ids.alias("ids"))
    return observed, lambda: sorted(int(i) for i in str(observation.get["ids"] or "").split(",") if i)


def with_avro_decoded(df: DataFrame, decode: dict, writers: AvroWriters) -> DataFrame:
    """Add ``decoded`` (the value decoded by its writer schema into the reader schema's shape, typed as the
    job's DDL) and ``decode_error`` (unknown magic byte, unknown schema id, a payload that does not decode).

    One CASE over the writer schema ids picks each record's ``from_avro``, so the Kafka read stays one pass.
    """
    from pyspark.sql.avro.functions import from_avro

    reader, marker = avro.marked_reader_schema(decode["reader"]["schema"])
    schema_id, header = F.expr(SCHEMA_ID), F.expr(HEADER)
    parsed: Column | None = None
    for writer_id, writer in sorted(writers.avro.items()):
        branch = from_avro(F.expr(PAYLOAD), writer, {"avroSchema": reader, "mode": "PERMISSIVE"})
        mine = header == header_of(writer_id)
        parsed = F.when(mine, branch) if parsed is None else parsed.when(mine, branch)
    known = F.lit(False) if not writers.avro else header.isin([header_of(i) for i in sorted(writers.avro)])
    error = (
        F.when(F.col("value").isNull(), F.lit(None))
        .when(F.expr(GUID_HEADER), F.lit(avro.GUID_FORM))
        .when(F.length("value") == 0, F.lit(avro.EMPTY_VALUE))
        .when(
            F.expr("substring(value, 1, 1) <> X'00'"),
            _text(avro.UNKNOWN_MAGIC, F.lower(F.hex(F.expr("substring(value, 1, 1)")))),
        )
        .when(F.length("value") < avro.WIRE_HEADER_BYTES, F.lit(avro.SHORT_HEADER))
    )
    for other_id, kind in sorted(writers.other.items()):
        error = error.when(header == header_of(other_id), F.lit(avro.not_avro(other_id, kind)))
    error = error.when(~known, _text(avro.UNKNOWN_SCHEMA_ID, schema_id.cast("string")))
    if parsed is not None:
        error = error.when(F.col("_parsed")[marker].isNull(), _text(avro.UNDECODABLE, schema_id.cast("string")))
        decoded = F.when(
            F.col("decode_error").isNull(), F.col("_parsed").dropFields(marker).cast(f"STRUCT<{decode['schema']}>")
        )
    else:  # none of the registry's writer schemas known so far is Avro
        decoded = F.lit(None).cast(f"STRUCT<{decode['schema']}>")
    out = df.withColumn("_parsed", parsed if parsed is not None else F.lit(None)).withColumn("decode_error", error)
    return out.withColumn("decoded", decoded).drop("_parsed")


def write_decoded(records: DataFrame, job: dict, spark_version: str, write: Write) -> tuple[DataFrame, Payload]:
    """Decode the records as the job says (JSON with its DDL schema, or Avro through the schema registry) and
    write them with ``write`` (the app's ``write_staged``, whose result it gives).

    Avro: a write that met writer schema ids the registry knows but the decode did not is done again with
    them (:class:`AvroWriters`); the Kafka ranges are then read a second time.
    """
    decode = job["decode"]
    if decode.get("format", "json") != "avro":
        return write(with_decoded(records, decode["schema"], spark_version), job)
    registry = job.get(contract.REGISTRY_ACCESS)
    if not registry:
        raise ValueError("the job decodes Avro values but gives no schema registry access")
    writers = AvroWriters(registry, decode["reader"]["subject"])
    while True:
        decoded, late_ids = late_writer_ids(with_avro_decoded(records, decode, writers))
        staged = write(decoded, job)
        if not writers.learn(late_ids()):
            return staged
