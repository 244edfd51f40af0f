"""What a mirror table's merge costs against the table's size (a figure, not a test).

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.merge_cost [--rows 10000000] [--changes 100000]
        [--file-rows 250000] [--spreads clustered,uniform] [--spark-line 4.0 | --no-spark]

An Iceberg mirror table of ``--rows`` rows (``id``, ``name``, ``qty`` and the mirror's provenance
columns), sorted by ``id`` in files of ``--file-rows`` rows, in a SQL catalog in the stack's PostgreSQL
(the ledger's kind of catalog) on local disk, and a change set of ``--changes`` changes, the last change
per key as Spark computes it for a batch (70% updates, 15% deletes, 15% new keys), either ``clustered``
on the newest 2% of the keys (a source table whose recent rows are the ones that change) or spread
``uniform`` over every key. Each contender applies the same change set to the table's same state (the
table is set back to it between them):

- ``package``: the commit step's merge (``sinks.iceberg_merge.merge``, a copy-on-write overwrite of the
  files whose key statistics may hold a changed key), in this process as the Airflow worker runs it;
- ``full_rewrite``: the whole table read, the changes applied, the table overwritten;
- ``spark_merge_into``: Spark's ``MERGE INTO`` (iceberg-spark-runtime, copy-on-write) by the line's
  spark-submit (``local[2]``, a cold JVM), through Iceberg's JdbcCatalog on the same catalog. Its figure
  includes the JVM's start; ``spark_merge_into_statement_s`` is the statement alone.

Each prints wall seconds, the data files and bytes it removed and added (the snapshot summaries) and
the table's rows afterwards, which must be the same for all. Spark's computation of the change set
from the batch's records is the same for every contender and not counted.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import devstack
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.sinks import iceberg_merge
from airflow_kafka_offsets.sinks.schema import mirror_schema
from airflow_kafka_offsets.spark.versions import spark_home_spark, table_reader_package
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import DELETED
from benchmarks.common import say
from devstack import spark_lines

KEY = ("id",)
SPREADS = ("clustered", "uniform")
HOT_SHARE = 0.02  # clustered: the changes' keys are among the newest 2% of the table's
SPARK_SCRIPT = """
import json, sys, time
from pyspark.sql import SparkSession
job = json.load(open(sys.argv[1]))
spark = SparkSession.builder.getOrCreate()
spark.read.parquet(job["changes"]).createOrReplaceTempView("changes")
columns = job["columns"]
update = ", ".join(f"t.{c} = c.{c}" for c in columns)
insert = f"({', '.join(columns)}) VALUES ({', '.join('c.' + c for c in columns)})"
started = time.perf_counter()
spark.sql(
    f"MERGE INTO {job['table']} t USING changes c ON t.id = c.id "
    f"WHEN MATCHED AND c._deleted THEN DELETE WHEN MATCHED THEN UPDATE SET {update} "
    f"WHEN NOT MATCHED AND NOT c._deleted THEN INSERT {insert}"
)
print(json.dumps({"statement_s": time.perf_counter() - started}), flush=True)
spark.stop()
"""


def table_schema() -> pa.Schema:
    spec = build_spec("bench", ["t"], "/x", json_schema="id BIGINT, name STRING, qty BIGINT", sink=mirror_sink())
    return mirror_schema(spec.decode)


def mirror_sink() -> dict[str, Any]:
    return {"format": "iceberg", "table": "bench.mirror", "merge_key": "id", "changes": "upsert"}


def rows(schema: pa.Schema, ids: pa.Array, offset: int, op: str) -> pa.Table:
    """Mirror rows for ``ids``: a name and a quantity derived from the id, provenance at ``offset``."""
    n = len(ids)
    ids64 = pc.cast(ids, pa.int64())
    columns = {
        "id": ids64,
        "name": pc.binary_join_element_wise("name-", pc.cast(ids64, pa.string()), ""),
        "qty": pc.multiply(ids64, 3),
        "_kafka_partition": pa.array([0] * n, pa.int32()),
        "_kafka_offset": pa.array(range(offset, offset + n), pa.int64()),
        "_source_position": pa.nulls(n, pa.string()),
        "_source_ts_ms": pa.array([1_700_000_000_000] * n, pa.int64()),
        "_op": pa.array([op] * n, pa.string()),
    }
    return pa.table({f.name: columns[f.name] for f in schema}, schema=schema)


def build_table(catalog: SqlCatalog, identifier: str, schema: pa.Schema, total: int, file_rows: int) -> Table:
    """The table, one data file per ``file_rows`` rows, sorted by id (each file a narrow key range)."""
    table = catalog.create_table(identifier, schema=schema, properties={"write.parquet.compression-codec": "zstd"})
    for start in range(0, total, file_rows):
        table.append(rows(schema, pa.array(range(start, min(total, start + file_rows))), start, "r"))
    return table


def change_set(schema: pa.Schema, total: int, changes: int, spread: str, seed: int) -> pa.Table:
    """The last change per key of a batch: updates and deletes of existing keys, puts of new ones."""
    rng = random.Random(seed)
    new = changes * 15 // 100
    existing = changes - new
    low = int(total * (1 - HOT_SHARE)) if spread == "clustered" else 0
    if total - low < existing:
        raise SystemExit(f"--changes {changes} is more than the {total - low} keys a {spread} change set draws from")
    touched = sorted(rng.sample(range(low, total), existing))
    deletes = set(rng.sample(touched, changes * 15 // 100))
    updated = rows(schema, pa.array(touched + list(range(total, total + new))), 10**9, "u")
    updated = updated.set_column(updated.schema.get_field_index("qty"), "qty", pc.add(updated.column("qty"), 1))
    flags = [i in deletes for i in touched] + [False] * new
    return updated.append_column(DELETED, pa.array(flags, pa.bool_()))


def expected_after(total: int, changes: pa.Table) -> dict[str, int]:
    """The table's rows and sum of ``qty`` after the change set (a base row's qty is 3 * id, a put's 3 * id + 1)."""
    existing = changes.filter(pc.less(changes.column("id"), total))
    puts = changes.filter(pc.invert(changes.column(DELETED)))
    qty = 3 * (total * (total - 1) // 2) - 3 * (pc.sum(existing.column("id")).as_py() or 0)
    return {
        "rows": total - existing.num_rows + puts.num_rows,
        "qty_sum": qty + (pc.sum(puts.column("qty")).as_py() or 0),
    }


def summary_figures(table: Table, base: int) -> dict[str, Any]:
    """Files and bytes that the snapshots from ``base`` to the current one removed and added."""
    keys = {
        "files_removed": "deleted-data-files",
        "files_added": "added-data-files",
        "bytes_removed": "removed-files-size",
        "bytes_added": "added-files-size",
    }
    figures = dict.fromkeys(keys, 0)
    snapshot = table.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != base:
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        for name, key in keys.items():
            figures[name] += int(summary.get(key, 0) or 0)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return figures


def table_state(table: Table) -> dict[str, int]:
    """The table's rows and sum of ``qty``, as a reader sees them."""
    qty = table.refresh().scan(selected_fields=("qty",)).to_arrow().column("qty")
    return {"rows": len(qty), "qty_sum": pc.sum(qty).as_py() or 0}


def package_merge(table: Table, changes: pa.Table) -> None:
    transaction = table.transaction()
    iceberg_merge.merge(transaction, changes, KEY, {"kafka-offsets.operation": "commit"})
    transaction.commit_transaction()


def full_rewrite(table: Table, changes: pa.Table) -> None:
    current = table.scan().to_arrow()
    changed = pc.is_in(current.column("id"), value_set=changes.column("id"))
    kept = current.filter(pc.invert(changed))
    puts = changes.filter(pc.invert(changes.column(DELETED))).drop_columns([DELETED])
    table.overwrite(pa.concat_tables([kept, puts.cast(kept.schema)]))


def spark_merge_into(info: devstack.StackInfo, line: str, table: Table, warehouse: str, changes: str) -> float:
    """Spark's MERGE INTO by spark-submit; the statement's own seconds."""
    home = spark_lines.spark_home(spark_lines.resolve(line), quiet=True)
    spark = spark_home_spark(home)
    assert spark is not None
    package = table_reader_package("iceberg", spark.version)
    ivy = str(Path.home() / ".cache" / "airflow-kafka-offsets" / "ivy")
    conf = {
        "spark.jars.ivy": ivy,
        "spark.jars.packages": f"{package},org.postgresql:postgresql:42.7.4",
        "spark.ui.enabled": "false",
        "spark.master": "local[2]",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.bench.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "spark.sql.catalog.bench.uri": f"jdbc:postgresql://{info.pg_host}:{info.pg_port}/{info.pg_database}",
        "spark.sql.catalog.bench.jdbc.user": info.pg_user,
        "spark.sql.catalog.bench.jdbc.password": info.pg_password,
        "spark.sql.catalog.bench.warehouse": warehouse,
    }
    with tempfile.TemporaryDirectory(prefix="ako-bench-merge-") as tmp:
        properties = Path(tmp) / "spark.properties"  # holds the catalog's password: a private file, not argv
        properties.touch(mode=0o600)
        properties.write_text("".join(f"{key} {value}\n" for key, value in conf.items()))
        job = Path(tmp) / "job.json"
        columns = [field.name for field in table.schema().fields]
        job.write_text(json.dumps({"table": f"bench.{'.'.join(table.name())}", "changes": changes, "columns": columns}))
        script = Path(tmp) / "merge_into.py"
        script.write_text(SPARK_SCRIPT)
        done = subprocess.run(
            [str(home / "bin" / "spark-submit"), "--properties-file", str(properties), str(script), str(job)],
            capture_output=True,
            text=True,
            env=spark_lines.submit_env(home),
            check=False,
        )
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line]
        raise SystemExit("Spark's MERGE INTO failed:\n" + "\n".join(errors[-20:] or done.stderr.splitlines()[-40:]))
    said = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return float(said[-1]["statement_s"])


def run_spread(
    info: devstack.StackInfo, catalog: SqlCatalog, spread: str, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    namespace = f"merge_{spread}_{uuid.uuid4().hex[:6]}"
    catalog.create_namespace(namespace)
    schema = table_schema()
    started = time.perf_counter()
    table = build_table(catalog, f"{namespace}.mirror", schema, args.rows, args.file_rows)
    say(
        f"{spread}: a table of {args.rows:,} rows in {len(list(table.scan().plan_files()))} files built in "
        f"{time.perf_counter() - started:.1f}s"
    )
    base = table.current_snapshot()
    assert base is not None
    changes = change_set(schema, args.rows, args.changes, spread, args.seed)
    changes_file = workdir / f"{namespace}-changes.parquet"
    pq.write_table(changes, changes_file)
    expected = expected_after(args.rows, changes)
    contenders: dict[str, dict[str, Any]] = {}

    def spark(table: Table) -> dict[str, Any]:
        warehouse = str(workdir / "warehouse")
        return {"statement_s": round(spark_merge_into(info, args.spark_line, table, warehouse, str(changes_file)), 2)}

    runs = {"package": package_merge, "full_rewrite": full_rewrite}
    for name, apply in runs.items():
        contenders[name] = timed(table, base.snapshot_id, lambda t, apply=apply: apply(t, changes), expected)
        say(f"{spread} {name}: {json.dumps(contenders[name])}")
    if args.spark_line:
        contenders["spark_merge_into"] = timed(table, base.snapshot_id, spark, expected)
        say(f"{spread} spark_merge_into: {json.dumps(contenders['spark_merge_into'])}")
    return {"rows": args.rows, "changes": args.changes, "files": -(-args.rows // args.file_rows), **contenders}


def timed(table: Table, base: int, apply: Any, expected: dict[str, int]) -> dict[str, Any]:
    """``apply`` on the table set back to snapshot ``base``: its seconds, what it rewrote, the rows after."""
    table.manage_snapshots().set_current_snapshot(snapshot_id=base).commit()
    table = table.refresh()
    started = time.perf_counter()
    extra = apply(table) or {}
    seconds = time.perf_counter() - started
    table = table.refresh()
    state = table_state(table)
    if state != expected:
        raise SystemExit(f"{table.name()}: the table holds {state} after a merge, expected {expected}")
    return {"seconds": round(seconds, 2), **summary_figures(table, base), **state, **extra}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--file-rows", type=int, default=250_000)
    parser.add_argument("--spreads", default=",".join(SPREADS))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spark-line", default="4.0", help="the Spark line whose MERGE INTO runs (4.0 or 4.1)")
    parser.add_argument("--no-spark", dest="spark_line", action="store_const", const=None)
    args = parser.parse_args(argv)
    spreads = [s for s in args.spreads.split(",") if s]
    unknown = sorted(set(spreads) - set(SPREADS))
    if unknown:
        parser.error(f"--spreads: unknown {', '.join(unknown)} (of {', '.join(SPREADS)})")
    info = devstack.up()
    with tempfile.TemporaryDirectory(prefix="ako-bench-merge-") as tmp:
        workdir = Path(tmp)
        catalog = SqlCatalog(
            "bench", uri=info.pg_url(), warehouse=f"file://{workdir / 'warehouse'}", **{"init_catalog_tables": "true"}
        )
        results = {spread: run_spread(info, catalog, spread, args, workdir) for spread in spreads}
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # this process: the table built too
    print(json.dumps({"merge_cost": results, "process_peak_rss_mib": peak_rss_mib}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
