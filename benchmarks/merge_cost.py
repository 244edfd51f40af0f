"""What a mirror table's merge costs against the table's size (a figure, not a test).

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.merge_cost [--rows 10000000] [--changes 100000]
        [--file-rows 250000] [--formats iceberg,delta] [--spreads clustered,uniform] [--spark-line 4.0 | --no-spark]
        [--spark-connect CONN_ID]

A mirror table of ``--rows`` rows (``id``, ``name``, ``qty`` and the mirror's provenance columns), sorted by
``id`` in files of ``--file-rows`` rows, on local disk: an Iceberg table in a SQL catalog in the stack's
PostgreSQL (the ledger's kind of catalog) and a Delta table. A change set of ``--changes`` changes, the
last change per key as Spark computes it for a batch (70% updates, 15% deletes, 15% new keys), either
``clustered`` on the newest 2% of the keys (a source table whose recent rows are the ones that change) or
spread ``uniform`` over every key. Each contender applies the same change set to the table's same state
(the table is set back to it between them):

- ``package_spark`` (with a Spark line or ``--spark-connect``): the package's merge as a batch runs it: Spark
  rewrites the files holding a changed key (``spark_apps/kafka_batch_rewrite.py``, by the line's spark-submit
  in ``local[2]``, a cold JVM, or on the warm Connect server; ``statement_s`` is the rewrite alone), then the
  commit step swaps them in from their footers (``commit_s``, in this process as the Airflow worker runs it);
- ``package``: the commit step's merge in this process, as when the table moved since Spark's rewrites
  (Iceberg: ``sinks.iceberg_merge.merge`` without them, a copy-on-write overwrite of the files whose key
  statistics may hold a changed key; Delta: ``sinks.delta_merge.merge``, delta-rs's MERGE);
- ``full_rewrite``: the whole table read, the changes applied, the table overwritten;
- ``spark_merge_into``: Spark's ``MERGE INTO`` (iceberg-spark-runtime through Iceberg's JdbcCatalog on the
  same catalog, copy-on-write; delta-spark) by the line's spark-submit (``local[2]``, a cold JVM). Its
  ``seconds`` include the JVM's start; ``statement_s`` is the statement alone.

Each prints wall seconds, the data files and bytes it removed and added (the table's files before and
after), the table's rows and sum of ``qty`` afterwards, which must be the same for all, and this process's
resident memory before it ran and at its peak meanwhile (``worker_rss_mib``, ``worker_peak_rss_mib``: the
Airflow worker's share; Spark's JVMs are other processes). Spark's
computation of the change set from the batch's records is the same for every contender and not counted.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

import devstack
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.hooks.spark import spark_connection
from airflow_kafka_offsets.object_storage.storage import Storage
from airflow_kafka_offsets.sinks import delta_merge, iceberg_merge
from airflow_kafka_offsets.sinks.change_set import SparkRewrite, put_rows, spark_rewrite
from airflow_kafka_offsets.sinks.schema import mirror_schema
from airflow_kafka_offsets.spark.connect import connect_mode, remote_session
from airflow_kafka_offsets.spark.settings import DEFAULT_SPARK_CONF
from airflow_kafka_offsets.spark.versions import spark_home_spark, table_reader_package
from airflow_kafka_offsets.spark_apps import kafka_batch_contract, kafka_batch_rewrite
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import DELETED
from benchmarks.common import say
from devstack import spark_lines

KEY = ("id",)
SPREADS = ("clustered", "uniform")
FORMATS = ("iceberg", "delta")
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
SPARK_REWRITE_SCRIPT = """
import json, sys, time
from pyspark.sql import SparkSession
import kafka_batch_rewrite
job = json.load(open(sys.argv[1]))
spark = SparkSession.builder.getOrCreate()
started = time.perf_counter()
report = kafka_batch_rewrite.rewrite_files(spark, job, spark.read.parquet(job["changes"]))
print(json.dumps({"statement_s": time.perf_counter() - started, "report": report}), flush=True)
spark.stop()
"""


def table_schema() -> pa.Schema:
    sink = {"format": "iceberg", "table": "bench.mirror", "merge_key": "id", "changes": "upsert"}
    spec = build_spec("bench", ["t"], "/x", json_schema="id BIGINT, name STRING, qty BIGINT", sink=sink)
    assert spec.sink.merge is not None
    return mirror_schema(spec.decode, spec.sink.merge)


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


class IcebergMirror:
    """The mirror as an Iceberg table in a SQL catalog (``bench``), set back to its base snapshot at will."""

    def __init__(self, catalog: SqlCatalog, identifier: str, schema: pa.Schema) -> None:
        self.table = catalog.create_table(
            identifier, schema=schema, properties={"write.parquet.compression-codec": "zstd"}
        )
        self.base: int | None = None

    def append(self, part: pa.Table) -> None:
        self.table.append(part)

    def mark_base(self) -> None:
        snapshot = self.table.current_snapshot()
        self.base = snapshot.snapshot_id if snapshot is not None else None

    def reset(self) -> None:
        self.table.manage_snapshots().set_current_snapshot(snapshot_id=self.base).commit()
        self.table = self.table.refresh()

    def files(self) -> dict[str, int]:
        self.table = self.table.refresh()
        return {t.file.file_path: t.file.file_size_in_bytes for t in self.table.scan().plan_files()}

    def qty(self) -> pa.ChunkedArray:
        self.table = self.table.refresh()  # another writer (Spark) may have committed
        return self.table.scan(selected_fields=("qty",)).to_arrow().column("qty")

    def package_merge(self, changes: pa.Table, rewrite: SparkRewrite | None = None) -> None:
        transaction = self.table.transaction()
        iceberg_merge.merge(transaction, changes, KEY, {"kafka-offsets.operation": "commit"}, rewrite)
        transaction.commit_transaction()

    def package_spark(self, changes: pa.Table, spark: SparkRewriteStep) -> dict[str, Any]:
        """Spark's rewrite by spark-submit, then the commit from the rewrites' footers."""
        self.table = self.table.refresh()
        rewrite, said = spark.run(iceberg_merge.rewrite_job(self.table, KEY), spark.workdir / "iceberg-staging")
        started = time.perf_counter()
        self.package_merge(changes, rewrite)
        return {"statement_s": round(said, 2), "commit_s": round(time.perf_counter() - started, 2)}

    def full_rewrite(self, changes: pa.Table) -> None:
        self.table.overwrite(applied(self.table.scan().to_arrow(), changes))

    def spark(self, info: devstack.StackInfo, spark_version: str, warehouse: str) -> tuple[dict[str, str], str]:
        """The Spark conf that reaches this table with Spark's own Iceberg runtime, and its name there."""
        conf = {
            "spark.jars.packages": f"{table_reader_package('iceberg', spark_version)},org.postgresql:postgresql:42.7.4",
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.bench.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            "spark.sql.catalog.bench.uri": f"jdbc:postgresql://{info.pg_host}:{info.pg_port}/{info.pg_database}",
            "spark.sql.catalog.bench.jdbc.user": info.pg_user,
            "spark.sql.catalog.bench.jdbc.password": info.pg_password,
            "spark.sql.catalog.bench.warehouse": warehouse,
        }
        return conf, f"bench.{'.'.join(self.table.name())}"


class DeltaMirror:
    """The mirror as a Delta table, set back to its base version at will (a restore commit)."""

    def __init__(self, location: Path) -> None:
        self.location = str(location)
        self.base = -1

    def table(self) -> DeltaTable:
        return DeltaTable(self.location)

    def append(self, part: pa.Table) -> None:
        write_deltalake(self.location, part, mode="append")

    def mark_base(self) -> None:
        self.base = self.table().version()

    def reset(self) -> None:
        table = self.table()
        if table.version() != self.base:
            table.restore(self.base)

    def files(self) -> dict[str, int]:
        actions = self.table().get_add_actions(flatten=True)
        paths, sizes = actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()
        return dict(zip(paths, sizes, strict=True))

    def qty(self) -> pa.ChunkedArray:
        return self.table().to_pyarrow_table(columns=["qty"]).column("qty")

    def package_merge(self, changes: pa.Table) -> None:
        delta_merge.merge(self.table(), changes, KEY, {"kafka-offsets.operation": "commit"}, None)

    def package_spark(self, changes: pa.Table, spark: SparkRewriteStep) -> dict[str, Any]:
        """Spark's rewrite by spark-submit (its staging in the table's directory, as a batch's), then the Delta
        commit that swaps the rewrites in."""
        table = self.table()
        staging = f"{self.location}/batch=000000000001/bench-{uuid.uuid4().hex[:8]}"
        rewrite, said = spark.run(delta_merge.rewrite_job(table, self.location, KEY), Path(staging))
        started = time.perf_counter()
        properties = CommitProperties({"kafka-offsets.operation": "commit"}, max_commit_retries=0)
        delta_merge.swap(table, self.location, Storage(), rewrite, changes, KEY, staging, properties)
        return {"statement_s": round(said, 2), "commit_s": round(time.perf_counter() - started, 2)}

    def full_rewrite(self, changes: pa.Table) -> None:
        write_deltalake(self.location, applied(self.table().to_pyarrow_table(), changes), mode="overwrite")

    def spark(self, info: devstack.StackInfo, spark_version: str, warehouse: str) -> tuple[dict[str, str], str]:
        conf = {
            "spark.jars.packages": table_reader_package("delta", spark_version),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        }
        return conf, f"delta.`{self.location}`"


Mirror = IcebergMirror | DeltaMirror


def applied(current: pa.Table, changes: pa.Table) -> pa.Table:
    """The rows of ``current`` with the change set applied (the full rewrite's new table)."""
    kept = current.filter(pc.invert(pc.is_in(current.column("id"), value_set=changes.column("id"))))
    puts = put_rows(changes)
    return pa.concat_tables([kept, puts.select(kept.column_names).cast(kept.schema)])


def spark_submit(line: str, script_text: str, job: dict[str, Any], conf: dict[str, str], py_files: list[str]) -> Any:
    """Run ``script_text`` with ``job`` by the line's spark-submit in ``local[2]``; the last JSON line it printed."""
    home = spark_lines.spark_home(spark_lines.resolve(line), quiet=True)
    conf = {
        "spark.jars.ivy": str(Path.home() / ".cache" / "airflow-kafka-offsets" / "ivy"),
        "spark.ui.enabled": "false",
        "spark.master": "local[2]",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
        **DEFAULT_SPARK_CONF,
        **conf,
    }
    with tempfile.TemporaryDirectory(prefix="ako-bench-merge-") as tmp:
        properties = Path(tmp) / "spark.properties"  # may hold the catalog's password: a private file, not argv
        properties.touch(mode=0o600)
        properties.write_text("".join(f"{key} {value}\n" for key, value in conf.items()))
        job_file = Path(tmp) / "job.json"
        job_file.write_text(json.dumps(job))
        script = Path(tmp) / "script.py"
        script.write_text(script_text)
        shipped = ["--py-files", ",".join(py_files)] if py_files else []
        done = subprocess.run(
            [
                str(home / "bin" / "spark-submit"),
                "--properties-file",
                str(properties),
                *shipped,
                str(script),
                str(job_file),
            ],
            capture_output=True,
            text=True,
            env=spark_lines.submit_env(home),
            check=False,
        )
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line]
        raise SystemExit("Spark failed:\n" + "\n".join(errors[-20:] or done.stderr.splitlines()[-40:]))
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][-1]


def spark_merge_into(info: devstack.StackInfo, line: str, mirror: Mirror, workdir: Path, changes: Path) -> float:
    """Spark's MERGE INTO by spark-submit; the statement's own seconds."""
    spark = spark_home_spark(spark_lines.spark_home(spark_lines.resolve(line), quiet=True))
    assert spark is not None
    table_conf, target = mirror.spark(info, spark.version, str(workdir / "warehouse"))
    columns = [name for name in pq.read_schema(changes).names if name != DELETED]
    job = {"table": target, "changes": str(changes), "columns": columns}
    return float(spark_submit(line, SPARK_SCRIPT, job, table_conf, [])["statement_s"])


class SparkRewriteStep:
    """How ``package_spark`` runs the app's rewrite step: by the line's spark-submit with the app's modules
    (``line``), or on the stack's warm Spark Connect server (``connect``: the connection's id) in this process,
    as a batch's read step does in Connect mode."""

    def __init__(self, line: str | None, connect: str | None, changes_file: Path, workdir: Path) -> None:
        self.line, self.connect, self.changes_file, self.workdir = line, connect, changes_file, workdir

    def run(self, rewrite_job: dict[str, Any], staging: Path) -> tuple[SparkRewrite, float]:
        """Spark's rewrites of the files ``rewrite_job`` lists, and the seconds of the step alone."""
        merge = {"key": list(KEY), "changes": "upsert", "rewrite": rewrite_job}
        job = {"staging_uri": str(staging), "changes": str(self.changes_file), "merge": merge}
        said = self._on_connect(job) if self.connect else self._by_submit(job)
        rewrite = spark_rewrite(Storage(), str(staging), {"changes": {"rewrite": said["report"]}})
        assert rewrite is not None
        return rewrite, float(said["statement_s"])

    def _by_submit(self, job: dict[str, Any]) -> Any:
        assert self.line is not None
        apps = Path(kafka_batch_contract.__file__).parent
        modules = [str(apps / name) for name in ("kafka_batch_contract.py", "kafka_batch_rewrite.py")]
        return spark_submit(self.line, SPARK_REWRITE_SCRIPT, job, {}, modules)

    def _on_connect(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.connect is not None
        session = remote_session(spark_connection(self.connect).connect_url())
        try:
            with connect_mode():
                started = time.perf_counter()
                report = kafka_batch_rewrite.rewrite_files(session, job, session.read.parquet(job["changes"]))
                return {"statement_s": time.perf_counter() - started, "report": report}
        finally:
            session.stop()


def peak_rss_reset() -> int:
    """Reset this process's peak resident set size to what it holds now (Linux: ``clear_refs`` 5), which it
    returns in MiB: the next :func:`peak_rss_mib` is then the peak of what ran in between."""
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss_mib()


def peak_rss_mib() -> int:
    """This process's peak resident set size since the last reset (``VmHWM``), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise SystemExit("no VmHWM in /proc/self/status: the worker's peak memory is measured on Linux only")


def run_case(
    info: devstack.StackInfo, mirror: Mirror, label: str, args: argparse.Namespace, workdir: Path, spread: str
) -> dict[str, Any]:
    schema = table_schema()
    started = time.perf_counter()
    for first in range(0, args.rows, args.file_rows):
        mirror.append(rows(schema, pa.array(range(first, min(args.rows, first + args.file_rows))), first, "r"))
    mirror.mark_base()
    base_files = mirror.files()
    built = time.perf_counter() - started
    say(f"{label}: a table of {args.rows:,} rows in {len(base_files)} files built in {built:.1f}s")
    changes = change_set(schema, args.rows, args.changes, spread, args.seed)
    changes_file = workdir / f"{label}-changes.parquet"
    pq.write_table(changes, changes_file)
    expected = expected_after(args.rows, changes)
    runs: dict[str, Any] = {"package": mirror.package_merge, "full_rewrite": mirror.full_rewrite}
    if args.spark_line or args.spark_connect:
        step = SparkRewriteStep(args.spark_line, args.spark_connect, changes_file, workdir / label)
        runs = {"package_spark": lambda c: mirror.package_spark(c, step), **runs}
    if args.spark_line:
        runs["spark_merge_into"] = lambda _: {
            "statement_s": round(spark_merge_into(info, args.spark_line, mirror, workdir, changes_file), 2)
        }
    contenders: dict[str, dict[str, Any]] = {}
    for name, apply in runs.items():
        mirror.reset()
        before_rss = peak_rss_reset()
        started = time.perf_counter()
        extra = apply(changes) or {}
        seconds = time.perf_counter() - started
        peak_rss = peak_rss_mib()
        qty = mirror.qty()
        state = {"rows": len(qty), "qty_sum": pc.sum(qty).as_py() or 0}
        if state != expected:
            raise SystemExit(f"{label} {name}: the table holds {state} after the merge, expected {expected}")
        after = mirror.files()
        removed, added = base_files.keys() - after.keys(), after.keys() - base_files.keys()
        contenders[name] = {
            "seconds": round(seconds, 2),
            "files_removed": len(removed),
            "bytes_removed": sum(base_files[f] for f in removed),
            "files_added": len(added),
            "bytes_added": sum(after[f] for f in added),
            **state,
            **extra,
            # this process's (the Airflow worker's part) peak while the contender ran, over what it held before
            "worker_rss_mib": before_rss,
            "worker_peak_rss_mib": peak_rss,
        }
        say(f"{label} {name}: {json.dumps(contenders[name])}")
    return {"rows": args.rows, "changes": args.changes, "files": len(base_files), **contenders}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--file-rows", type=int, default=250_000)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--spreads", default=",".join(SPREADS))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spark-line", default="4.0", help="the Spark line whose MERGE INTO runs (4.0 or 4.1)")
    parser.add_argument("--no-spark", dest="spark_line", action="store_const", const=None)
    parser.add_argument(
        "--spark-connect",
        metavar="CONN_ID",
        help="package_spark's rewrite on this Spark Connect connection's warm server instead of spark-submit "
        "(its statement_s is then a warm server's, not the same mode as MERGE INTO's)",
    )
    args = parser.parse_args(argv)
    formats, spreads = (
        chosen(parser, "--formats", args.formats, FORMATS),
        chosen(parser, "--spreads", args.spreads, SPREADS),
    )
    info = devstack.up()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ako-bench-merge-") as tmp:
        workdir = Path(tmp)
        catalog = SqlCatalog("bench", uri=info.pg_url(), warehouse=f"file://{workdir / 'warehouse'}")
        for table_format in formats:
            for spread in spreads:
                label = f"{table_format}-{spread}"
                name = f"merge_{spread}_{uuid.uuid4().hex[:6]}"
                mirror: Mirror
                if table_format == "iceberg":
                    catalog.create_namespace(name)
                    mirror = IcebergMirror(catalog, f"{name}.mirror", table_schema())
                else:
                    mirror = DeltaMirror(workdir / name)
                results[label] = run_case(info, mirror, label, args, workdir, spread)
    print(json.dumps({"merge_cost": results}, indent=1, sort_keys=True))
    return 0


def chosen(parser: argparse.ArgumentParser, option: str, given: str, known: tuple[str, ...]) -> list[str]:
    names = [name for name in given.split(",") if name]
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"{option}: unknown {', '.join(unknown)} (of {', '.join(known)})")
    return names


if __name__ == "__main__":
    raise SystemExit(main())
