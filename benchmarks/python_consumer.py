"""A plain Python consumer (confluent-kafka) writing Parquet with pyarrow, run as its own process.

Assigns every partition of the topic from its beginning, reads up to the end offsets it saw at
start, and writes the same columns as the Spark contenders, zstd-compressed, one row group per
chunk. Prints one JSON line: {"records": N, "payload_bytes": B, "files": F}.

    python -m benchmarks.python_consumer --bootstrap HOST:PORT --topic T --output DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(HEADER)),
    ]
)


HeaderValue = str | bytes | None


def _headers(raw: list[tuple[str, HeaderValue]] | dict[str, HeaderValue] | None) -> list[dict[str, Any]] | None:
    """A message's headers as Spark's column holds them (a consumed message's are a list of pairs)."""
    if raw is None:
        return None
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [{"key": k, "value": v} for k, v in pairs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--chunk", type=int, default=200_000, help="rows per row group")
    args = parser.parse_args(argv)

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "bench-python-consumer",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 262_144,
        }
    )
    metadata = consumer.list_topics(args.topic, timeout=30).topics[args.topic]
    ends: dict[int, int] = {}
    for p in metadata.partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)
        if high > low:
            ends[p] = high
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in ends])
    remaining = set(ends)

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(out / "part-00000.parquet", SCHEMA, compression="zstd")
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    records = payload = 0

    def flush() -> None:
        if not cols["offset"]:
            return
        arrays = [pa.array(cols[f.name], type=f.type) for f in SCHEMA]
        writer.write_table(pa.Table.from_arrays(arrays, schema=SCHEMA))
        for values in cols.values():
            values.clear()

    while remaining:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            error = msg.error()
            if error:
                raise RuntimeError(error.str())
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None  # a consumed record has both
            if partition not in remaining or offset >= ends[partition]:
                continue
            key, value = msg.key(), msg.value()
            ts_type, ts = msg.timestamp()
            cols["key"].append(key)
            cols["value"].append(value)
            cols["topic"].append(msg.topic())
            cols["partition"].append(partition)
            cols["offset"].append(offset)
            cols["timestamp"].append(ts)
            cols["timestampType"].append(ts_type - 1)  # librdkafka: 1 create time, 2 log append; Spark: 0, 1
            cols["headers"].append(_headers(msg.headers()))
            records += 1
            payload += (len(key) if key else 0) + (len(value) if value else 0)
            if offset == ends[partition] - 1:
                remaining.discard(partition)
            if len(cols["offset"]) >= args.chunk:
                flush()
    flush()
    writer.close()
    consumer.close()
    print(json.dumps({"records": records, "payload_bytes": payload, "files": 1}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
