"""The Spark app's rewrite step: a mirror's data files that hold a changed key, without those rows.

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
The job's ``merge.rewrite`` lists the mirror's live data files with the bounds of the first key column (the
table's metadata, read by the package before the job); ``kafka_batch_contract.py`` describes it. Three passes,
each over less than the one before, none over the table:

1. the change set's distinct first key values (the batch's size) pick the files whose bounds hold one;
2. those files' key columns alone, semi-joined with the changed keys, count the rows each file loses;
3. the files that lose rows are read whole and written again without them, one directory per file.

The commit then swaps each such file for its rewrite in one copy-on-write commit (an Iceberg snapshot, a Delta
version), so the Airflow worker never reads the table's rows. The files are read as Parquet by column name (the
mirror's columns are only ever added, never renamed); a column some of them lack is read as null, as Iceberg
reads it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

if __package__:
    from . import kafka_batch_contract as contract
else:
    import kafka_batch_contract as contract

FILE = "_kafka_offsets_file"


def _with_file(frame: DataFrame) -> DataFrame:
    """``frame`` with the path of the file each row was read from, as Spark names it."""
    return frame.withColumn(FILE, F.col("_metadata.file_path"))


def rewrite_files(spark: SparkSession, job: dict, changes: DataFrame) -> dict:
    """Write the rewrite of every listed file that holds a changed key to ``<staging_uri>/_rewrites/``; the
    report's ``rewrite`` (``kafka_batch_contract.py``). ``changes`` is the change set as written."""
    merge = job["merge"]
    key, rewrite = list(merge["key"]), merge["rewrite"]
    files = rewrite["files"]
    keys = changes.select(*key).distinct()
    firsts = sorted(row[0] for row in keys.select(key[0]).distinct().collect() if row[0] is not None)
    chosen = [files[i]["path"] for i in contract.files_in_key_bounds(files, firsts)]
    report: dict = {"base": rewrite["base"], "files": []}
    if not chosen:
        return report
    losing = (
        _with_file(spark.read.parquet(*chosen))
        .select(*key, FILE)
        .join(keys, on=key, how="left_semi")
        .groupBy(FILE)
        .count()
        .collect()
    )
    named = _spark_names(chosen, [row[FILE] for row in losing])
    places = {file["path"]: place for place, file in enumerate(files)}
    hits = sorted((named[row[FILE]], int(row["count"])) for row in losing)
    report["files"] = [{"path": path, "place": places[path], "removed": removed} for path, removed in hits]
    if not hits:  # the bounds held a changed key, the rows did not
        return report
    index = spark.createDataFrame(
        [(spark_name, places[path]) for spark_name, path in named.items()],
        f"{FILE} STRING, {contract.REWRITE_OF} INT",
    )
    rows = _with_file(spark.read.option("mergeSchema", "true").parquet(*[path for path, _ in hits]))
    columns = [c for c in rows.columns if c != FILE]
    kept = rows.join(keys, on=key, how="left_anti").join(F.broadcast(index), on=FILE)
    kept.select(*columns, contract.REWRITE_OF).repartition(contract.REWRITE_OF).write.mode("overwrite").partitionBy(
        contract.REWRITE_OF
    ).parquet(job["staging_uri"].rstrip("/") + "/" + contract.REWRITES_DIR)
    return report


def _spark_names(chosen: list[str], seen: list[str]) -> dict[str, str]:
    """Each file name Spark gave a row (``seen``) to the listed path it read: Spark qualifies paths (a scheme,
    ``file:`` for a local path) and may escape characters, so they are matched without scheme and slashes
    first; a name that matches no listed path, or two, fails the batch rather than rewrite the wrong file."""
    by_tail: dict[str, list[str]] = {}
    for path in chosen:
        by_tail.setdefault(contract.path_tail(path), []).append(path)
    named = {}
    for name in seen:
        listed = by_tail.get(contract.path_tail(name), [])
        if len(listed) != 1:
            raise ValueError(
                f"Spark read rows from {name}, which matches {len(listed)} of the mirror's listed data files: "
                "the rewrite cannot tell which file they belong to"
            )
        named[name] = listed[0]
    return named
