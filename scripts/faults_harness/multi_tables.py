"""What readers of a pipeline's many tables see after a trial (``--sink iceberg-multi|delta-multi``).

Each table is read as its readers do (PyIceberg, delta-rs), now and at the snapshot id or version
the ledger recorded for every committed batch (``batches.tables``, the documented way to read all
tables as of one batch). Problems: a batch committed to a table twice, a table commit of a batch the
ledger did not commit, a committed batch missing from a table it touched. A batch is **torn** when,
read as of some committed batch k, one table holds it and another table it touched does not, or a
table holds a batch after k: a reader would see tables at different batches.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from deltalake.exceptions import TableNotFoundError
from pyiceberg.exceptions import NoSuchTableError

from airflow_kafka_offsets.core.model import PipelineSpec, SinkFormat, SinkSpec, TopicPartition
from airflow_kafka_offsets.ledger import BatchRecord, Ledger
from airflow_kafka_offsets.readers import committed_outputs
from faults_harness.lake_readers import COMMIT_KEYS, delta_table, iceberg_catalog, read_table, table_commits

COLUMNS = ["key", "topic", "partition", "offset"]
OPERATION, BATCH, _ATTEMPT = COMMIT_KEYS


def table_spec(spec: PipelineSpec, table: str) -> PipelineSpec:
    """The pipeline as if it wrote ``table`` alone (what the single-table readers take)."""
    return replace(spec, sink=SinkSpec(spec.sink.format, table, catalog_conn_id=spec.sink.catalog_conn_id))


def rows_at(ledger: Ledger, spec: PipelineSpec, table: str, at: int | None) -> list[dict[str, Any]]:
    """``table``'s rows at snapshot id / version ``at`` (None: the table's current state)."""
    assert ledger.catalog_uri is not None
    if at is None:
        arrow = read_table(ledger.catalog_uri, ledger.schema, table_spec(spec, table))
    elif spec.sink.format is SinkFormat.ICEBERG:
        catalog = iceberg_catalog(ledger.catalog_uri, ledger.schema, table_spec(spec, table))
        arrow = catalog.load_table(table).scan(snapshot_id=at).to_arrow()
    else:
        delta = delta_table(table_spec(spec, table))  # with the storage's options: the table may be on S3
        delta.load_as_version(at)
        arrow = delta.to_pyarrow_table()
    rows: list[dict[str, Any]] = arrow.select(COLUMNS).to_pylist()
    return rows


def _batches_in(rows: list[dict[str, Any]], owner: dict[TopicPartition, list[tuple[int, int, int]]]) -> set[int]:
    found: set[int] = set()
    for row in rows:
        spans = owner.get(TopicPartition(row["topic"], int(row["partition"])), [])
        found.update(b for start, end, b in spans if start <= row["offset"] < end)
    return found


def multi_table_rows(
    ledger: Ledger, spec: PipelineSpec, committed: list[BatchRecord], planned: int | None, problems: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """Every table's current rows (for the lost/duplicated count), and how many batches are torn."""
    assert spec.sink.routes is not None and ledger.catalog_uri is not None
    outputs = committed_outputs(ledger, spec.name)
    touched = {o.batch_id: set(o.tables) for o in outputs}
    done = {r.plan.batch_id for r in committed}
    owner: dict[TopicPartition, list[tuple[int, int, int]]] = {}
    for record in committed:
        for r in record.plan.ranges:
            owner.setdefault(r.topic_partition, []).append((r.start, r.end, record.plan.batch_id))
    rows: list[dict[str, Any]] = []
    existing = []
    for table in spec.sink.routes.tables:
        try:
            commits = table_commits(ledger.catalog_uri, ledger.schema, table_spec(spec, table))
        except (NoSuchTableError, TableNotFoundError):  # no batch routed records to it yet
            if any(table in t for t in touched.values()):
                problems.append(f"table {table} holds committed batches by the ledger but cannot be read")
            continue
        existing.append(table)
        rows += rows_at(ledger, spec, table, None)
        times = Counter(int(c[BATCH]) for c in commits if c[OPERATION] == "commit")
        problems += [f"batch {b} committed to {table} {n} times" for b, n in sorted(times.items()) if n > 1]
        stray = sorted(set(times) - done - ({planned} if planned is not None else set()))
        if stray:
            problems.append(f"commits to {table} of batches the ledger did not commit: {stray}")
        absent = sorted(b for b, names in touched.items() if table in names and b not in times)
        if absent:
            problems.append(f"committed batches the ledger says are in {table} but are not: {absent}")
    key = "snapshot_id" if spec.sink.format is SinkFormat.ICEBERG else "version"
    torn = 0
    at: dict[str, int] = {}
    for output in outputs:
        at.update({t: int(e[key]) for t, e in output.tables.items()})
        for table in existing:
            expected = {b for b, names in touched.items() if b <= output.batch_id and table in names}
            seen = _batches_in(rows_at(ledger, spec, table, at[table]), owner) if table in at else set()
            if seen != expected:
                torn += 1
                problems.append(f"read as of batch {output.batch_id}, {table} holds batches {sorted(seen)}")
                break
    return rows, torn
