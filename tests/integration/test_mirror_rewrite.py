"""An Iceberg mirror's copy-on-write rewrite done by Spark (``spark_apps/kafka_batch_rewrite.py``) on the warm
Connect server, committed by the worker from the files' footers (``sinks/iceberg_merge.py``): a real table in
PyIceberg's SQL catalog, read back with PyIceberg.

The pipeline-level proof (Kafka to the mirror through crashes) is test_mirror_tables.py; this test looks at the
files: which Spark reads, which it rewrites, which the commit swaps, and the refusals that keep a stale or
damaged rewrite out of the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyiceberg.types import StringType

from airflow_kafka_offsets.errors import ReportMismatchError
from airflow_kafka_offsets.hooks.spark import spark_connection
from airflow_kafka_offsets.object_storage.storage import Storage
from airflow_kafka_offsets.sinks.change_set import SparkRewrite, spark_rewrite
from airflow_kafka_offsets.sinks.iceberg_merge import merge, rewrite_job
from airflow_kafka_offsets.spark.connect import connect_mode, remote_session
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import CHANGES_DIR, DELETED, REWRITES_DIR
from airflow_kafka_offsets.spark_apps.kafka_batch_rewrite import rewrite_files

KEY = ["id"]
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("qty", pa.int64())])


@pytest.fixture()
def session(spark_connect: str) -> Iterator[Any]:
    spark = remote_session(spark_connection(spark_connect).connect_url())
    with connect_mode():  # as the read step runs the app on a Connect server
        yield spark
    spark.stop()


def mirror(tmp_path: Path) -> Table:
    """Five data files: ids 0-99, 100-199, the even ids 200-298, 300-399, then (after a column ``note`` was
    added, which the older files lack) 400-499 with a note."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.mirror", schema=SCHEMA)
    for ids in (range(100), range(100, 200), range(200, 300, 2), range(300, 400)):
        table.append(pa.table({"id": list(ids), "name": [f"n{i}" for i in ids], "qty": list(ids)}, schema=SCHEMA))
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = table.refresh()
    ids = range(400, 500)
    wide = SCHEMA.append(pa.field("note", pa.string()))
    table.append(
        pa.table({"id": list(ids), "name": [f"n{i}" for i in ids], "qty": list(ids), "note": ["x"] * 100}, wide)
    )
    return table.refresh()


def change_set(staging: Path) -> pa.Table:
    """Updates of 10, 150 and 450, a delete of 250, an update of 251 (absent: file 200-298's bounds hold it, its
    rows do not), a new key 1000; written where the app writes its change set."""
    changes = pa.table(
        {
            "id": [10, 150, 250, 251, 450, 1000],
            "name": ["ten", "one-fifty", None, "new-251", "four-fifty", "thousand"],
            "qty": [-1, -1, None, -1, -1, -1],
            "note": [None, None, None, None, "changed", None],
            DELETED: [False, False, True, False, False, False],
        }
    )
    (staging / CHANGES_DIR).mkdir(parents=True)
    pq.write_table(changes, staging / CHANGES_DIR / "part-0.parquet")
    return changes


def rows_of(table: Table) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: (r["name"], r["qty"], r["note"]) for r in table.refresh().scan().to_arrow().to_pylist()}


def expected_rows(before: dict[int, tuple[Any, ...]], changes: pa.Table) -> dict[int, tuple[Any, ...]]:
    after = dict(before)
    for change in changes.to_pylist():
        after.pop(change["id"], None)
        if not change[DELETED]:
            after[change["id"]] = (change["name"], change["qty"], change["note"])
    return after


def rewritten_by_spark(session: Any, table: Table, staging: Path) -> tuple[SparkRewrite, dict[str, Any]]:
    """Spark's rewrite of the table as it is now, and the report it gave."""
    job = {"staging_uri": str(staging), "merge": {"key": KEY, "changes": "upsert", "rewrite": rewrite_job(table, KEY)}}
    report = rewrite_files(session, job, session.read.parquet(str(staging / CHANGES_DIR)))
    rewrite = spark_rewrite(Storage(), str(staging), {"changes": {"rewrite": report}})
    assert rewrite is not None
    return rewrite, report


def commit(table: Table, changes: pa.Table, rewrite: SparkRewrite) -> None:
    transaction = table.refresh().transaction()
    merge(transaction, changes, KEY, {"kafka-offsets.batch": "1"}, rewrite)
    transaction.commit_transaction()


def test_spark_rewrites_only_the_files_losing_rows_and_the_commit_swaps_them_keeping_every_other_row(session, tmp_path):
    table = mirror(tmp_path)
    staging = tmp_path / "staging"
    changes = change_set(staging)
    before, files_before = rows_of(table), {t.file.file_path: t.file for t in table.scan().plan_files()}
    by_first_id = {min(pq.read_table(p.removeprefix("file://")).column("id").to_pylist()): p for p in files_before}
    rewrite, report = rewritten_by_spark(session, table, staging)

    # the files of 10, 150, 250 and 450 lose one row each; 300-399 holds no changed key, 200-298 holds no 251
    assert report["base"] == str(table.current_snapshot().snapshot_id)
    assert sorted((f["path"], f["removed"]) for f in report["files"]) == sorted(
        (by_first_id[first], 1) for first in (0, 100, 200, 400)
    )
    commit(table, changes, rewrite)

    assert rows_of(table) == expected_rows(before, changes)  # PyIceberg's reader: every row, once
    assert rows_of(table)[451] == ("n451", 451, "x")  # the rows kept from the newer file keep their note
    assert rows_of(table)[11] == ("n11", 11, None)  # an older file's rows read it as null
    files_after = {t.file.file_path for t in table.refresh().scan().plan_files()}
    swapped = {by_first_id[first] for first in (0, 100, 200, 400)}
    assert files_after & set(files_before) == set(files_before) - swapped
    from_spark = {p for p in files_after - set(files_before) if f"/{REWRITES_DIR}/" in p}
    assert len(from_spark) == 4  # each swapped file's rows less its changed one, as Spark wrote them
    assert table.metadata.properties.get("schema.name-mapping.default")  # Spark's files carry no field ids


def test_a_rewrite_of_a_state_the_table_left_is_not_used_and_a_damaged_one_is_refused(session, tmp_path):
    table = mirror(tmp_path)
    staging = tmp_path / "staging"
    changes = change_set(staging)
    before = rows_of(table)
    rewrite, _ = rewritten_by_spark(session, table, staging)

    # a damaged rewrite (a file of it gone from the attempt's directory) is refused and the table stays as it was
    first = rewrite.rewritten[0]
    for file in first.files:
        Path(file.uri).unlink()
    damaged = replace(rewrite, rewritten=(replace(first, files=()), *rewrite.rewritten[1:]))
    snapshot = table.refresh().current_snapshot().snapshot_id
    records = {t.file.file_path: t.file.record_count for t in table.scan().plan_files()}[first.path]
    with pytest.raises(ReportMismatchError, match=f"holds 0 rows, but the file has {records} of which 1 change"):
        commit(table, changes, damaged)
    assert table.refresh().current_snapshot().snapshot_id == snapshot and rows_of(table) == before

    # a compaction after Spark's rewrite: its base is gone, so the worker merges the compacted state instead
    table.refresh().overwrite(table.scan().to_arrow(), snapshot_properties={"maintenance": "compaction"})
    commit(table, changes, rewrite)
    assert rows_of(table) == expected_rows(before, changes)
    assert not [t for t in table.refresh().scan().plan_files() if f"/{REWRITES_DIR}/" in t.file.file_path]


def test_a_change_inside_a_files_bounds_but_not_in_its_rows_rewrites_nothing(session, tmp_path):
    table = mirror(tmp_path)
    staging = tmp_path / "staging"
    (staging / CHANGES_DIR).mkdir(parents=True)
    put = {"id": [251], "name": ["new-251"], "qty": [-1], "note": [None], DELETED: [False]}
    changes = pa.table(put, schema=SCHEMA.append(pa.field("note", pa.string())).append(pa.field(DELETED, pa.bool_())))
    pq.write_table(changes, staging / CHANGES_DIR / "part-0.parquet")
    before, files_before = rows_of(table), {t.file.file_path for t in table.scan().plan_files()}
    rewrite, report = rewritten_by_spark(session, table, staging)
    assert report["files"] == [] and not (staging / REWRITES_DIR).exists()
    commit(table, changes, rewrite)
    assert rows_of(table) == {**before, 251: ("new-251", -1, None)}
    assert files_before < {t.file.file_path for t in table.refresh().scan().plan_files()}  # only the put's file
