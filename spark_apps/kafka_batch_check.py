"""The Spark app's check of a batch's written files against its planned ranges, and the key + value bytes
per range it reports.

A batch is proved from what the write left behind (``kafka_batch_proof.py``): the Kafka read's records
counted as the write runs (an observed metric), against the files' Parquet footers. Its key + value bytes per
range are the footers' size statistics when the files hold the raw key and value and Spark writes them
(:func:`sizes_in_footers`), else one more observed sum per range; a batch of more than OBSERVED_RANGES_MAX
ranges to sum (one sum per range would not fit Spark's generated code) is checked by reading its offsets back
(:func:`summarize`).

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): its modules are siblings
    from . import kafka_batch_contract as contract
    from . import kafka_batch_proof as proof
else:  # spark-submit ships them beside this file (--py-files)
    import kafka_batch_contract as contract
    import kafka_batch_proof as proof

# A batch of at most this many ranges counts its key + value bytes per range while it is written.
OBSERVED_RANGES_MAX = 256


class BatchCheckError(RuntimeError):
    """What was written does not match the requested ranges."""


def payload_bytes() -> Column:
    return F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))


Counted = Callable[[], dict[tuple[str, int], int]]


def with_counted_payload(partitions: list[dict], payload: Counted | None) -> list[dict]:
    """The partitions' key + value bytes as ``payload`` counted them, when it did (else as summarized)."""
    if payload is not None:
        counted = payload()
        for part in partitions:
            part["payload_bytes"] = counted.get((part["topic"], part["partition"]), 0)
    return partitions


def summarize(written: DataFrame, decoding: bool = False, payload: Counted | None = None) -> list[dict]:
    """Per topic partition: records, min and max offset, distinct offsets, key + value bytes (+ decode errors).

    Distinct offsets are counted exactly without shuffling every offset (as countDistinct does):
    offsets are grouped in blocks of 64 (``offset >> 6``), each block ORs ``1 << (offset & 63)``
    into a 64-bit mask, and the bits set in a block's mask are its distinct offsets (a repeated
    offset sets no new bit). Consecutive offsets collapse 64 to 1 before the shuffle.
    With ``payload`` (the bytes counted while the write ran) only the offsets' columns are read
    back: the keys and values, nearly all of the files, are not read again.
    """
    per_block = [
        F.count(F.lit(1)).alias("records"),
        F.min("offset").alias("min_offset"),
        F.max("offset").alias("max_offset"),
        F.expr("bit_or(shiftleft(1L, CAST(offset & 63 AS INT)))").alias("offset_bits"),
    ]
    per_partition = [
        F.sum("records").alias("records"),
        F.min("min_offset").alias("min_offset"),
        F.max("max_offset").alias("max_offset"),
        F.sum(F.expr("bit_count(offset_bits)")).alias("distinct_offsets"),
    ]
    if payload is None:
        per_block.append(F.sum(payload_bytes()).alias("payload_bytes"))
        per_partition.append(F.sum("payload_bytes").alias("payload_bytes"))
    if decoding:
        per_block.append(F.count("decode_error").alias("decode_errors"))
        per_partition.append(F.sum("decode_errors").alias("decode_errors"))
    blocks = written.groupBy("topic", "partition", F.shiftright("offset", 6).alias("offset_block")).agg(*per_block)
    rows = blocks.groupBy("topic", "partition").agg(*per_partition).collect()
    partitions = sorted((row.asDict() for row in rows), key=lambda r: (r["topic"], r["partition"]))
    return with_counted_payload(partitions, payload)


ReadCounts = Callable[[], dict]


def sizes_in_footers(job: dict, spark_version: str) -> bool:
    """Whether the files' footers will give the batch's key + value bytes: its records are written as read (no
    decoding) by Spark 4.0 or later (parquet-java 1.14+, which records the unencoded bytes of byte arrays)."""
    return not job.get("decode") and int(spark_version.split(".")[0]) >= 4


def with_range_metrics(records: DataFrame, job: dict, sizes_from_footers: bool) -> tuple[DataFrame, ReadCounts | None]:
    """The records with their count, and unless ``sizes_from_footers`` their key + value bytes per planned range,
    taken as the write runs (an observed metric: no second pass), and how to get them after it
    (``kafka_batch_proof.Read``); None for a batch of more than OBSERVED_RANGES_MAX ranges to sum."""
    ranges = sorted({(str(r["topic"]), int(r["partition"])) for r in job["ranges"]})
    if not sizes_from_footers and len(ranges) > OBSERVED_RANGES_MAX:
        return records, None
    from pyspark.sql import Observation

    observation = Observation("kafka_batch_read")
    metrics = [F.count(F.lit(1)).alias("records")]
    if not sizes_from_footers:
        size = payload_bytes()
        in_range = [
            (F.col("topic") == F.lit(topic)) & (F.col("partition") == F.lit(partition)) for topic, partition in ranges
        ]
        metrics += [F.sum(F.when(condition, size)).alias(f"bytes_{i}") for i, condition in enumerate(in_range)]

    def counted() -> dict:
        found = observation.get
        sizes = None if sizes_from_footers else {key: int(found.get(f"bytes_{i}") or 0) for i, key in enumerate(ranges)}
        return {"records": int(found.get("records") or 0), "payload_bytes": sizes}

    return records.observe(observation, *metrics), counted


def prove_written(
    job: dict, footers: list[dict], counted: ReadCounts, decoding: bool, written: Callable[[], DataFrame]
) -> list[dict]:
    """The batch's per-partition summary, proved from the files' footers and the read's counts. Footers without
    the size statistics the write expected (another writer) leave the bytes to a sum over the
    ``written`` files' keys and values."""
    read = counted()
    if read["payload_bytes"] is None and not proof.sizes_recorded(footers):
        read = {**read, "payload_bytes": counted_from_read(written())()}
    partitions, problems = proof.prove(job["ranges"], footers, read, decoding)
    if problems:
        raise BatchCheckError("; ".join(problems))
    return partitions


def check_against_ranges(job: dict, partitions: list[dict]) -> None:
    """Every offset inside its range, none twice; gaps (markers, compaction) are allowed."""
    problems = contract.range_problems(job["ranges"], partitions)
    if problems:
        raise BatchCheckError("; ".join(problems))


def counted_from_read(records: DataFrame) -> Counted:
    """The key + value bytes per range summed over the Kafka read itself (``records``, before any decode): a
    second read of the ranges, for a batch whose written values are not all there and whose ranges are too
    many for an observed metric."""

    def counted() -> dict[tuple[str, int], int]:
        rows = records.groupBy("topic", "partition").agg(F.sum(payload_bytes())).collect()
        return {(str(topic), int(partition)): int(size or 0) for topic, partition, size in rows}

    return counted
