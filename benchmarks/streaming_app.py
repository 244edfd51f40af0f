"""The usual alternative: Spark Structured Streaming, Trigger.AvailableNow, a checkpoint, a Parquet sink.

Submitted by the harness with spark-submit and the same connector jars and Spark settings as the
package's batches; it reads the whole topic from the earliest offsets into Parquet and stops.

    spark-submit --jars ... benchmarks/streaming_app.py --bootstrap HOST:PORT --topic T \
        --output DIR --checkpoint DIR [--min-partitions N]
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import SparkSession

# The same columns the package writes.
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def run_available_now(
    spark: SparkSession, bootstrap: str, topic: str, output: str, checkpoint: str, min_partitions: int | None = None
) -> int:
    """The whole topic into Parquet with Trigger.AvailableNow; returns the rows read. ``spark`` is a
    classic session (spark-submit) or a Spark Connect one (the same query on a warm server)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .option("kafka.isolation.level", "read_committed")
    )
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    query = (
        reader.load()
        .select(*COLUMNS)
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = query.recentProgress
    # classic sessions give dicts, Spark Connect StreamingQueryProgress objects (that may leave it out)
    rows = sum(int((p.get("numInputRows") if isinstance(p, dict) else p.numInputRows) or 0) for p in progress)
    print(f"streaming_app: {rows} rows in {len(progress)} micro-batch(es)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--min-partitions", type=int)
    args = parser.parse_args(argv)
    spark = SparkSession.builder.getOrCreate()
    try:
        run_available_now(spark, args.bootstrap, args.topic, args.output, args.checkpoint, args.min_partitions)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
