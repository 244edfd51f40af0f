"""The Spark app's check of a batch's written files against its planned ranges (the read-back), and the
key + value bytes per range it reports.

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): the contract is its sibling
    from . import kafka_batch_contract as contract
else:  # spark-submit ships it beside this file (--py-files)
    import kafka_batch_contract as contract

# A batch of at most this many planned offsets is checked from its collected rows: one Spark job
# without a shuffle instead of the aggregate's three stages. On a warm Spark Connect server
# (medians, seconds, collected against aggregate): 10,000 records 0.24-0.30 against 0.45-0.63,
# 30,000 0.48-0.51 against 0.60-0.70, 100,000 0.99-1.29 against 0.72-0.78 (benchmarks/README.md).
COLLECTED_CHECK_MAX_OFFSETS = 50_000
# A larger batch of at most this many ranges counts its key + value bytes while it is written.
OBSERVED_PAYLOAD_MAX_RANGES = 256


class BatchCheckError(RuntimeError):
    """What was written does not match the requested ranges."""


def planned_offsets(job: dict) -> int:
    return sum(int(r["end"]) - int(r["start"]) for r in job["ranges"])


def payload_bytes() -> Column:
    return F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))


def read_back_check(job: dict) -> Callable[..., list[dict]]:
    """How the batch's written files are summarized: from collected rows when it is small."""
    return summarize_collected if planned_offsets(job) <= COLLECTED_CHECK_MAX_OFFSETS else summarize


Counted = Callable[[], dict[tuple[str, int], int]]


def summarize_collected(written: DataFrame, decoding: bool = False, payload: Counted | None = None) -> list[dict]:
    """:func:`summarize` of a small batch, computed on the driver from the rows' offsets and sizes."""
    decode_error = F.col("decode_error").isNotNull() if decoding else F.lit(False)
    rows = written.select("topic", "partition", "offset", payload_bytes(), decode_error).collect()
    return with_counted_payload(contract.summarize_rows((tuple(row) for row in rows), decoding), payload)


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


def with_payload_metric(records: DataFrame, job: dict) -> tuple[DataFrame, Counted | None]:
    """The records with their key + value bytes per planned range counted as the write runs (an
    observed metric), and how to get the counts after it; no metric for a batch of many ranges
    (one sum per range), nor for one small enough to be checked from its collected rows unless its
    written values are not all there (:func:`kafka_batch_contract.keeps_raw_values`)."""
    ranges = sorted({(str(r["topic"]), int(r["partition"])) for r in job["ranges"]})
    small = planned_offsets(job) <= COLLECTED_CHECK_MAX_OFFSETS and contract.keeps_raw_values(job)
    if small or len(ranges) > OBSERVED_PAYLOAD_MAX_RANGES:
        return records, None
    from pyspark.sql import Observation

    observation = Observation("kafka_batch_payload_bytes")
    size = payload_bytes()
    sums = [
        F.sum(F.when((F.col("topic") == F.lit(topic)) & (F.col("partition") == F.lit(partition)), size)).alias(
            f"range_{index}"
        )
        for index, (topic, partition) in enumerate(ranges)
    ]

    def counted() -> dict[tuple[str, int], int]:
        metrics = observation.get
        return {key: int(metrics.get(f"range_{index}") or 0) for index, key in enumerate(ranges)}

    return records.observe(observation, *sums), counted


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
