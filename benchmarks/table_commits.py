"""What a batch's commit costs per sink and storage (a figure, not a test).

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.table_commits [--batches 40] [--records 10000]

For each sink (directory, Iceberg, Delta) on local disk and (tables) on the stack's S3 server, it
publishes ``--batches`` batches, each an attempt of two Parquet files of ``--records`` records
written with Arrow where Spark would write them, inside a ledger transaction as the commit step
does, and prints the median time of a publication and of the last tenth of them (does the cost grow
with the table's history?). Spark's own time is not part of it: it is the same for every sink.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

import psycopg2
import pyarrow as pa
import pyarrow.parquet as pq

import devstack
from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import s3_access
from airflow_kafka_offsets.object_storage.storage import Storage
from airflow_kafka_offsets.sinks import Publication, open_sink
from airflow_kafka_offsets.sinks.schema import RECORD_SCHEMA
from benchmarks.common import say


def attempt_files(storage: Storage, staging_uri: str, first_offset: int, records: int) -> None:
    """Two Parquet files and a report, as a Spark attempt leaves them."""
    fs, base = storage.filesystem(staging_uri)
    fs.create_dir(base, recursive=True)
    half = records // 2
    for part, start in enumerate((first_offset, first_offset + half)):
        rows = pa.table(
            {
                "key": pa.array([f"k{o}".encode() for o in range(start, start + half)], pa.binary()),
                "value": pa.array([b"v" * 400] * half, pa.binary()),
                "topic": pa.array(["bench"] * half, pa.string()),
                "partition": pa.array([0] * half, pa.int32()),
                "offset": pa.array(range(start, start + half), pa.int64()),
                "timestamp": pa.array([0] * half, pa.timestamp("us", tz="UTC")),
                "timestampType": pa.array([0] * half, pa.int32()),
                "headers": pa.array([[]] * half, RECORD_SCHEMA.field("headers").type),
            }
        )
        with fs.open_output_stream(f"{base}/part-{part:05d}.parquet") as out:
            pq.write_table(rows, out)
    with fs.open_output_stream(f"{base}/_kafka_batch_report.json") as out:
        out.write(b'{"attempt_id": "bench"}')


def run_case(info: devstack.StackInfo, sink_format: str, root: str, batches: int, records: int) -> list[float]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=schema, catalog_uri=info.pg_url())
    ledger.migrate()
    table = {"iceberg": "bench.events", "delta": "events"}.get(sink_format)
    sink_option = {"format": sink_format, "table": table} if table else None
    spec = build_spec("bench", ["bench"], root, sink=sink_option)
    s3 = s3_access("s3", info.s3_access_key, info.s3_secret_key, info.s3_connection()["extra"])
    sink = open_sink(spec, ledger.catalog_uri, schema, s3 if root.startswith("s3://") else None)
    sink.check_writable(None)
    storage = Storage(s3)
    times = []
    try:
        for batch_id in range(1, batches + 1):
            first = (batch_id - 1) * records
            plan = BatchPlan("bench", batch_id, 0, (PartitionRange("bench", 0, first, first + records, first),), "")
            attempt = uuid.uuid4().hex
            staging = sink.staging_uri("bench", batch_id, attempt)
            attempt_files(storage, staging, first, records)
            started = time.perf_counter()
            with ledger.transaction() as tx:
                sink.publish(tx, Publication("uid", plan, attempt, staging, 0, None))
            times.append(time.perf_counter() - started)
    finally:
        with ledger.transaction() as tx:
            tx.execute(f'DROP SCHEMA "{schema}" CASCADE')
            if sink_format == "iceberg":  # the catalog's tables exist once an Iceberg sink has used them
                tx.execute("DELETE FROM iceberg_tables WHERE catalog_name = %s", (schema,))
                tx.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = %s", (schema,))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args(argv)
    info = devstack.up()
    local = tempfile.mkdtemp(prefix="table-commits-")
    cases = [("directory", local), ("iceberg", local), ("delta", local)]
    cases += [(f, f"s3://{info.s3_bucket}/bench-{uuid.uuid4().hex[:8]}") for f in ("iceberg", "delta")]
    say(f"publication of one batch ({args.records} records in 2 files), {args.batches} batches per case")
    say(f"{'sink':10} {'storage':8} {'median ms':>10} {'last tenth ms':>14}")
    for sink_format, root in cases:
        times = run_case(info, sink_format, root, args.batches, args.records)
        tail = times[-max(1, len(times) // 10) :]
        where = "s3" if root.startswith("s3://") else "local"
        say(
            f"{sink_format:10} {where:8} {statistics.median(times) * 1000:10.1f} {statistics.median(tail) * 1000:14.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
