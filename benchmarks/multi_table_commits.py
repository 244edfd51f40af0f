"""What the commit of one batch into many tables costs (a figure, not a test).

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.multi_table_commits [--tables 10,100] [--batches 3]

For each table count and format (Iceberg in the ledger's catalog, Delta) on local disk, a pipeline
of that many topics, each routed to its own table, publishes ``--batches`` batches. Each batch is
an attempt of one Parquet file of ``--records`` records per table, written with Arrow where Spark
writes them, published inside one ledger transaction as the commit step does. Printed: the first
batch's time (it creates every table: for Iceberg inside that transaction) and the median of the
others, in milliseconds, and per table. Spark's time is not part of it (the same one job whatever
the number of tables); the ledger's own statements are measured by the scaling section of
``benchmarks.run``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid

import psycopg2

import devstack
from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.sinks import Publication, open_sink
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME, TABLE_COLUMN
from benchmarks.common import say
from benchmarks.table_commits import attempt_files


def run_case(info: devstack.StackInfo, sink_format: str, tables: int, batches: int, records: int) -> list[float]:
    """Seconds of each batch's publication into ``tables`` tables."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=schema, catalog_uri=info.pg_url())
    ledger.migrate()
    topics = [f"topic{i:03d}" for i in range(tables)]
    namespace = "bench." if sink_format == "iceberg" else ""
    routes = {t: f"{namespace}t{i:03d}" for i, t in enumerate(topics)}
    spec = build_spec(
        "bench", topics, tempfile.mkdtemp(prefix="multi-commits-"), sink={"format": sink_format, "tables": routes}
    )
    sink = open_sink(spec, ledger.catalog_uri, schema)
    sink.check_writable(None)
    storage = files.Storage()
    times = []
    try:
        for batch_id in range(1, batches + 1):
            first = (batch_id - 1) * records
            ranges = tuple(PartitionRange(t, 0, first, first + records, first) for t in topics)
            plan = BatchPlan("bench", batch_id, 0, ranges, "")
            attempt = uuid.uuid4().hex
            staging = sink.staging_uri("bench", batch_id, attempt)
            for table in routes.values():
                attempt_files(storage, files.join(staging, f"{TABLE_COLUMN}={table}"), first, records)
            report = {"routing": {"tables": {table: records for table in routes.values()}, "unrouted": 0}}
            storage.write_bytes(files.join(staging, REPORT_NAME), json.dumps(report).encode())
            started = time.perf_counter()
            with ledger.transaction() as tx:
                sink.publish(tx, Publication("uid", plan, attempt, staging, records * tables, None))
            times.append(time.perf_counter() - started)
    finally:
        with ledger.transaction() as tx:
            tx.execute(f'DROP SCHEMA "{schema}" CASCADE')
            if sink_format == "iceberg":
                tx.execute("DELETE FROM iceberg_tables WHERE catalog_name = %s", (schema,))
                tx.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = %s", (schema,))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="10,100", help="comma list of table counts")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000, help="records per table and batch")
    args = parser.parse_args(argv)
    info = devstack.up()
    say(f"commit of one batch into N tables ({args.records} records per table), {args.batches} batches per case")
    say(f"{'format':8} {'tables':>6} {'first ms':>10} {'then ms':>10} {'then ms/table':>14}")
    for count in (int(n) for n in args.tables.split(",")):
        for sink_format in ("iceberg", "delta"):
            times = run_case(info, sink_format, count, args.batches, args.records)
            later = statistics.median(times[1:]) if len(times) > 1 else times[0]
            say(f"{sink_format:8} {count:6d} {times[0] * 1000:10.1f} {later * 1000:10.1f} {later * 1000 / count:14.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
