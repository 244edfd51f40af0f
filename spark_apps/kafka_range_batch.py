"""Read exact Kafka offset ranges with Spark and stage them as Parquet.

Submitted by airflow-kafka-offsets through spark-submit (``main``, the driver's JVM at hand:
``kafka_batch_read.JvmRuntime``), or, with a Spark Connect connection, imported by the package and
run in the worker's process against the Connect server (``run`` with the package's
runtime; the Kafka read and the Parquet write run on the server). It imports nothing
from Airflow (executors and cluster drivers do not have it) and shares only
two documented JSON formats with the package, the job file and the report, described and defined with
the names and the range check in ``kafka_batch_contract.py`` beside it. Its other modules, shipped beside
it with ``--py-files`` too: ``kafka_batch_read.py`` (the read step: the version checks and the Kafka
read), ``kafka_batch_decode.py`` (the JSON and Avro decode step), ``kafka_batch_avro.py`` (the Confluent
wire format and the schema registry's answers), ``kafka_batch_routes.py`` (the many-tables step),
``kafka_batch_changes.py`` (the merge step), ``kafka_batch_rewrite.py`` (a mirror's rewritten
files), ``kafka_batch_check.py`` (the check of what was written) and ``kafka_batch_proof.py`` (its proof from
the files' footers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from pyspark import SparkFiles
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): its modules are siblings
    from . import kafka_batch_changes as changes_step
    from . import kafka_batch_check as check
    from . import kafka_batch_contract as contract
    from . import kafka_batch_decode as decode_step
    from . import kafka_batch_read as read_step
    from . import kafka_batch_rewrite as rewrite_step
    from . import kafka_batch_routes as routes
else:  # spark-submit ships them beside this file (--py-files)
    import kafka_batch_changes as changes_step
    import kafka_batch_check as check
    import kafka_batch_contract as contract
    import kafka_batch_decode as decode_step
    import kafka_batch_read as read_step
    import kafka_batch_rewrite as rewrite_step
    import kafka_batch_routes as routes

# Parquet dictionaries for the columns that hold a new value in nearly every record cost the writer
# CPU for nothing (it falls back to plain pages): about 8% of a 1M-record write's CPU on a Connect server.
# Other columns (a decoded value's fields) keep theirs up to 32 KiB instead of Parquet's 1 MiB: a column of
# more distinct values falls back to plain sooner, with the same files when it would have anyway (1M
# decoded Avro records: 7.5 CPU s against 8.3 with 1 MiB, the same 231.8 MB; a raw batch unchanged).
WRITE_OPTIONS = {f"parquet.enable.dictionary#{column}": "false" for column in ("value", "offset", "timestamp")}
WRITE_OPTIONS["parquet.dictionary.page.size"] = str(32 * 1024)


def load_job(job_file: str) -> dict:
    """The job file arrives through --files (cluster modes) or as a local path (client mode)."""
    candidates = [job_file]
    try:
        candidates.insert(0, SparkFiles.get(os.path.basename(job_file)))
    except Exception:  # no SparkContext files directory yet
        pass
    for path in candidates:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                job = json.load(handle)
            if job.get("format") != contract.JOB_FORMAT:
                raise ValueError(f"unsupported job format {job.get('format')!r}, expected {contract.JOB_FORMAT}")
            return job
    raise FileNotFoundError(f"job file {job_file} not found (looked in {candidates})")


def write_errors(written: DataFrame, staging: str, decode: dict | None, routing: dict | None, undecoded: int) -> None:
    """Records that did not decode (``undecoded``: none, no scan) or have no table, to ``<staging>/_errors/``."""
    columns = [F.col(c) for c in ("topic", "partition", "offset", "timestamp", "key", "value")]
    failed = F.lit(False)
    if decode:
        columns.append(F.col("decode_error"))
        failed = F.col("decode_error").isNotNull() if undecoded else F.lit(False)
    if routing:
        no_route = F.col(contract.TABLE_COLUMN).isNull()
        columns.append(F.when(no_route, F.lit(contract.NO_ROUTE)).alias("route_error"))
        failed = failed | no_route
    written.where(failed).select(*columns).write.mode("overwrite").parquet(
        staging.rstrip("/") + "/" + contract.ERRORS_DIR
    )


def write_staged(records: DataFrame, job: dict) -> tuple[DataFrame, Callable[[], dict] | None]:
    """Write the records to the job's staging location (a directory per table or per day when asked); the
    frame written and how to get its counts per range (:func:`kafka_batch_check.with_range_metrics`)."""
    routing = job.get("routing")
    partition_columns: list[str] = []
    if routing:
        # One write for every table: a directory per table (no route: Spark's default partition).
        records = records.withColumn(contract.TABLE_COLUMN, routes.route_column(routing))
        partition_columns = [contract.TABLE_COLUMN]
    elif job.get("partition_by") == "day":
        # The UTC day whatever the session time zone: Iceberg's day() transform and Delta's
        # partition values are computed the same way.
        records = records.withColumn(
            contract.DAY_COLUMN, F.expr("date_from_unix_date(CAST(floor(unix_micros(timestamp) / 86400000000) AS INT))")
        )
        partition_columns = [contract.DAY_COLUMN]
    sizes_from_footers = check.sizes_in_footers(job, records.sparkSession.version)
    records, counted = check.with_range_metrics(records, job, sizes_from_footers)
    if not contract.keeps_raw_values(job):  # the decoded content is in `decoded`; after the bytes are counted
        records = records.withColumn("value", F.when(F.col("decode_error").isNotNull(), F.col("value")))
    writer = records.write.mode("overwrite").options(**WRITE_OPTIONS)
    (writer.partitionBy(*partition_columns) if partition_columns else writer).parquet(job["staging_uri"])
    return records, counted


def run(job: dict, spark: SparkSession, runtime: read_step.Runtime) -> dict:
    runtime.check_versions()
    staging = job["staging_uri"]
    decode = job.get("decode")
    routing = job.get("routing")
    read = read_step.read_ranges(spark, job, runtime)
    records, counted = (
        decode_step.write_decoded(read, job, spark.version, write_staged) if decode else write_staged(read, job)
    )

    def written_files() -> DataFrame:  # with the known schema: no inference pass
        return spark.read.schema(records.schema).parquet(staging)

    # What was written, read back only for the side outputs and a batch of many ranges.
    written = written_files() if decode or routing or counted is None else None
    if counted is not None:
        partitions = check.prove_written(job, runtime.footers(staging), counted, bool(decode), written_files)
    else:
        payload = None if contract.keeps_raw_values(job) else check.counted_from_read(read)
        partitions = check.summarize(written, decoding=bool(decode), payload=payload)
        check.check_against_ranges(job, partitions)
    if decode or routing:
        write_errors(written, staging, decode, routing, sum(p.get("decode_errors") or 0 for p in partitions))
    merged = changes_step.write_changes(written, job) if job.get("merge") else None  # merge decodes: written
    if merged is not None and job["merge"].get("rewrite") is not None:
        changes = spark.read.parquet(staging.rstrip("/") + "/" + contract.CHANGES_DIR)
        merged["rewrite"] = rewrite_step.rewrite_files(spark, job, changes)
    report = {
        "format": contract.REPORT_FORMAT,
        "pipeline": job["pipeline"],
        "batch_id": job["batch_id"],
        "attempt_id": job["attempt_id"],
        "spark_version": spark.version,
        "application_id": spark.conf.get("spark.app.id"),
        "master": spark.conf.get("spark.master"),
        "output_bytes": runtime.output_bytes(staging),
        "partitions": partitions,
        **({"routing": routes.route_report(written, routing)} if routing else {}),
        **({"changes": merged} if merged is not None else {}),
    }
    runtime.write_report(staging, json.dumps(report, sort_keys=True))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-file", required=True)
    args = parser.parse_args(argv)
    spark = SparkSession.builder.getOrCreate()
    try:
        job = load_job(args.job_file)
        contract.apply_private_conf(job, spark.sparkContext._jsc.hadoopConfiguration())
        report = run(job, spark, read_step.JvmRuntime(spark))
        records = sum(p["records"] for p in report["partitions"])
        print(f"kafka_range_batch: {job['pipeline']} batch {job['batch_id']}: {records} records staged", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
