"""What a reader sees after a trial, checked against what was produced.

Each sink is read the way its readers are told to read it, without the ledger where that is the
documented way (:mod:`faults_harness.lake_readers`):

- a local directory sink: the ``output_uri`` of every committed batch (``readers.committed_outputs``:
  a planned batch's directory may exist after a crash, so its readers follow the ledger);
- a directory sink on S3: every ``<root>/<pipeline>/batch=*/_manifest`` and the files each lists;
- Iceberg: PyIceberg's catalog; Delta: delta-rs; many tables: each of them, also as of every
  committed batch (:mod:`faults_harness.multi_tables`, which counts torn batches).

Every produced id must be read exactly once, at the partition and offset Kafka acknowledged,
inside the ranges of a committed batch whose ``records_committed`` counts it; the ledger must be
contiguous, with no batch left planned and its cursors at the ends of what was produced; nothing
may be visible that is not a committed batch's (a directory or manifest outside committed
batches, a table commit of a batch the ledger did not commit, a batch committed to a table
twice); the output of the batch still planned is tolerated (the replay takes it as it is or
replaces it). Last, the sweep removes what dead attempts left,
and every attempt still staged must be one the output uses or one whose worker may still live.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import PipelineSpec, SinkFormat, TopicPartition
from airflow_kafka_offsets.errors import PipelineNotFoundError
from airflow_kafka_offsets.ledger import BatchRecord, Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.readers import committed_outputs, read_output
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, object_storage
from airflow_kafka_offsets.service.operations.sweep import sweep
from airflow_kafka_offsets.sinks.manifest import manifest_uri
from faults_harness import avro_values
from faults_harness.lake_readers import COMMIT_KEYS, manifest_listing, read_table, table_commits
from faults_harness.multi_tables import multi_table_rows
from faults_harness.records import mirror_state

COLUMNS = ["key", "topic", "partition", "offset"]
MIRROR_COLUMNS = ["id", "n", "_kafka_partition", "_kafka_offset"]  # a mirror table's (merge sinks)
DECODED = ["decoded", "decode_error", "value"]  # what a decoding pipeline's rows are checked for
ACTOR = Actor(dag_id="faults_harness", run_id="verify")
OPERATION, BATCH, ATTEMPT = COMMIT_KEYS


def local_path(uri: str) -> Path:
    return Path(urlparse(uri).path)


@dataclass
class Verdict:
    produced: int = 0
    read: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    batches: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    torn: int | None = None  # sinks of many tables: batches a reader sees in one table and not another
    differing: int | None = None  # mirror tables: rows whose value or provenance is not their key's last change

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.problems or self.torn or self.differing)

    def summary(self) -> str:
        return (
            f"{self.batches} committed batches, {self.read} records read for {self.produced} produced: "
            f"lost {self.lost}, duplicated {self.duplicated}, unexpected {self.unexpected}"
            + ("" if self.torn is None else f", torn {self.torn}")
            + ("" if self.differing is None else f", rows differing {self.differing}")
        )


def _directory_rows(
    ledger: Ledger,
    spec: PipelineSpec,
    output_root: str,
    planned_uri: str | None,
    verdict: Verdict,
    columns: list[str] = COLUMNS,
) -> list[dict[str, Any]]:
    """Rows of a directory sink; problems for anything visible outside the committed batches."""
    outputs = committed_outputs(ledger, spec.name)
    visible_ok = {o.uri for o in outputs} | ({planned_uri} if planned_uri else set())
    s3 = object_storage(output_root)
    if s3 is None:
        rows: list[dict[str, Any]] = []
        for output in outputs:
            if not Path(output.path).is_dir():
                verdict.problems.append(f"batch {output.batch_id} is committed but its output {output.path} is missing")
                continue
            rows += read_output(output).select(columns).to_pylist()
        pipeline_dir = Path(output_root) / spec.name
        if pipeline_dir.is_dir():
            ok_paths = {local_path(u) for u in visible_ok}
            stray = sorted(p.name for p in pipeline_dir.iterdir() if p not in ok_paths)
            if stray:
                verdict.problems.append(f"outside committed batches under {pipeline_dir}: {', '.join(stray)}")
        return rows
    fs, prefix = files.Storage(s3).filesystem(files.join(files.location_uri(output_root), spec.name))
    manifests, rows = manifest_listing(fs, prefix)
    expected = {manifest_uri(u).removeprefix("s3://") for u in visible_ok}
    stray = sorted(set(manifests) - expected)
    if stray:
        verdict.problems.append(f"manifests outside committed batches: {', '.join(stray)}")
    missing = sorted(manifest_uri(o.uri) for o in outputs if manifest_uri(o.uri).removeprefix("s3://") not in manifests)
    if missing:
        verdict.problems.append(f"committed batches without a manifest: {', '.join(missing)}")
    return [{k: r[k] for k in columns} for r in rows]


def _table_rows(
    ledger: Ledger,
    spec: PipelineSpec,
    committed: list[BatchRecord],
    planned: int | None,
    verdict: Verdict,
    columns: list[str] = COLUMNS,
) -> list[dict[str, Any]]:
    """Rows of an Iceberg or Delta table; problems for commits the ledger does not account for."""
    assert ledger.catalog_uri is not None, "the ledger needs its catalog URI to read Iceberg tables"
    rows: list[dict[str, Any]] = read_table(ledger.catalog_uri, ledger.schema, spec).select(columns).to_pylist()
    commits = [c for c in table_commits(ledger.catalog_uri, ledger.schema, spec) if c[OPERATION] == "commit"]
    times = Counter(int(c[BATCH]) for c in commits)
    with ledger.transaction() as tx:
        attempts = {a.attempt_id: a for a in tx.attempts(spec.name, sorted(times))}
    for batch, n in sorted(times.items()):
        if n > 1:
            verdict.problems.append(f"batch {batch} committed to the table {n} times")
    done = {r.plan.batch_id for r in committed}
    uncommitted = sorted(set(times) - done - ({planned} if planned is not None else set()))
    if uncommitted:
        verdict.problems.append(f"table commits of batches the ledger did not commit: {uncommitted}")
    absent = sorted(r.plan.batch_id for r in committed if r.records_committed and r.plan.batch_id not in times)
    if absent:
        verdict.problems.append(f"committed batches with records but no table commit: {absent}")
    for c in commits:
        attempt = attempts.get(c[ATTEMPT])
        if attempt is None or attempt.state != "succeeded" or str(attempt.batch_id) != c[BATCH]:
            verdict.problems.append(
                f"table commit of batch {c[BATCH]} names attempt {c[ATTEMPT]}, not a succeeded attempt of that batch"
            )
    return rows


def _check_staging(ledger: Ledger, spec: PipelineSpec, planned: int | None, verdict: Verdict) -> None:
    """Sweep, then every attempt still staged must be used by the output, live, or the planned batch's."""
    sink = AIRFLOW_SINKS.for_spec(ledger, spec)
    swept = sweep(ledger, sink, spec.name, dry_run=False, actor=ACTOR)
    if swept.items:
        kinds = Counter(i.kind for i in swept.items)
        verdict.notes.append("the sweep removed " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    staged = sink.staged_attempts(spec.name)
    with ledger.transaction() as tx:
        attempts = {a.staging_uri: a for a in tx.attempts(spec.name, sorted(staged))}
    left = [
        uri
        for batch, uris in staged.items()
        for uri in uris
        if batch != planned and not sink.in_use(uri) and not (uri in attempts and attempts[uri].live)
    ]
    if left:
        verdict.problems.append(f"staged attempts the sweep left that nothing uses: {', '.join(left)}")


def verify(  # noqa: C901 - one check after another, each adding to the verdict
    ledger: Ledger, pipeline: str, output_root: str, produced: list[dict[str, Any]], *, expect_drained: bool = True
) -> Verdict:
    """``produced``: {"id", "partition", "offset"} of every acknowledged record of the pipeline's topic (Avro
    values: with the "decoded" fields or the "error" a reader must find for it)."""
    verdict = Verdict(produced=len(produced))
    try:
        with ledger.transaction() as tx:
            spec = tx.pipeline_spec(pipeline)
    except PipelineNotFoundError:  # never planned: everything produced is lost
        verdict.lost = len(produced) if expect_drained else 0
        verdict.problems.append(f"pipeline {pipeline} was never planned")
        return verdict
    committed = [b for b in ledger.committed_batches(pipeline) if b.plan.output_uri]
    verdict.batches = len(committed)
    with ledger.transaction() as tx:
        planned = tx.planned_batch_id(pipeline)
        planned_uri = tx.batch(pipeline, planned).plan.output_uri if planned is not None else None
        running = tx.fetchall(
            "SELECT attempt_id, batch_id FROM {s}.attempts WHERE pipeline = %s AND state = 'running'", (pipeline,)
        )
        cursors = tx.cursors(pipeline)

    if spec.sink.merge is not None:  # a mirror: one row per live key, not one per record
        rows = _table_rows(ledger, spec, committed, planned, verdict, MIRROR_COLUMNS)
        verdict.read = len(rows)
        check_mirror(rows, produced, verdict, expect_drained)
        return _check_ledger(ledger, spec, planned, running, cursors, produced, verdict, expect_drained)
    avro = any("error" in p for p in produced)
    columns = COLUMNS + (DECODED if avro else [])
    if spec.sink.format is SinkFormat.DIRECTORY:
        rows = _directory_rows(ledger, spec, output_root, planned_uri, verdict, columns)
    elif spec.sink.routes is not None:
        rows, verdict.torn = multi_table_rows(ledger, spec, committed, planned, verdict.problems)
    else:
        rows = _table_rows(ledger, spec, committed, planned, verdict, columns)
    verdict.read = len(rows)
    if avro:
        directory = spec.sink.format is SinkFormat.DIRECTORY  # tables keep bad records as rows with decode_error
        errors_rows = avro_values.errors_output(ledger, spec) if directory else []
        keep_raw_value = spec.decode is None or spec.decode.keep_raw_value
        verdict.problems += avro_values.problems(rows, produced, spec.sink.format, errors_rows, keep_raw_value)

    # every row inside a committed batch's ranges; each batch holds as many rows as the ledger counted
    owner: dict[TopicPartition, list[tuple[int, int, int]]] = {}
    for record in committed:
        for r in record.plan.ranges:
            owner.setdefault(r.topic_partition, []).append((r.start, r.end, record.plan.batch_id))
    per_batch: Counter[int] = Counter()
    outside = 0
    copies: Counter[str] = Counter()
    where: dict[str, tuple[int, int]] = {}
    for row in rows:
        spans = owner.get(TopicPartition(row["topic"], int(row["partition"])), [])
        batch = next((b for start, end, b in spans if start <= row["offset"] < end), None)
        if batch is None:
            outside += 1
        else:
            per_batch[batch] += 1
        key = row["key"].decode()
        copies[key] += 1
        where[key] = (int(row["partition"]), int(row["offset"]))
    if outside:
        verdict.problems.append(f"{outside} records outside the ranges of every committed batch")
    for record in committed:
        found = per_batch[record.plan.batch_id]
        if record.records_committed is not None and found != record.records_committed:
            verdict.problems.append(
                f"batch {record.plan.batch_id}: ledger says {record.records_committed} records, "
                f"the output holds {found}"
            )

    expected = {p["id"]: p for p in produced}
    verdict.duplicated = sum(1 for n in copies.values() if n > 1)
    verdict.lost = sum(1 for rid in expected if rid not in copies)
    verdict.unexpected = sum(1 for rid in copies if rid not in expected)
    if not expect_drained:  # records produced after the last plan are not lost yet
        verdict.lost = 0
    misplaced = [
        rid
        for rid, at in where.items()
        if rid in expected and at != (expected[rid]["partition"], expected[rid]["offset"])
    ]
    if misplaced:
        verdict.problems.append(f"{len(misplaced)} records at another partition/offset than Kafka acknowledged")
    for name, n, example in (
        ("lost", verdict.lost, [r for r in expected if r not in copies][:3]),
        ("duplicated", verdict.duplicated, [r for r, c in copies.items() if c > 1][:3]),
        ("unexpected", verdict.unexpected, [r for r in copies if r not in expected][:3]),
    ):
        if n:
            verdict.notes.append(f"{n} ids {name}, e.g. {example}")

    return _check_ledger(ledger, spec, planned, running, cursors, produced, verdict, expect_drained)


def check_mirror(rows: list[dict[str, Any]], produced: list[dict[str, Any]], verdict: Verdict, drained: bool) -> None:
    """A mirror's rows against the state the produced changes leave: each live key once, with its last
    value and where that came from; no deleted or unknown key."""
    expected = mirror_state(produced)
    copies = Counter(str(r["id"]) for r in rows)
    verdict.duplicated = sum(1 for n in copies.values() if n > 1)
    verdict.lost = sum(1 for rid in expected if rid not in copies) if drained else 0
    verdict.unexpected = sum(1 for rid in copies if rid not in expected)
    differ = [
        r["id"]
        for r in rows
        if r["id"] in expected
        and (r["n"], r["_kafka_partition"], r["_kafka_offset"])
        != (expected[r["id"]]["n"], expected[r["id"]]["partition"], expected[r["id"]]["offset"])
    ]
    verdict.differing = len(differ) if drained else 0
    if differ and drained:
        verdict.notes.append(f"{len(differ)} mirror rows differ from the last change of their key, e.g. {differ[:3]}")
    verdict.notes.append(f"mirror: {len(rows)} rows for {len(expected)} live keys of {len(produced)} changes")


def _check_ledger(
    ledger: Ledger,
    spec: PipelineSpec,
    planned: int | None,
    running: list[tuple[Any, ...]],
    cursors: dict[TopicPartition, int],
    produced: list[dict[str, Any]],
    verdict: Verdict,
    expect_drained: bool,
) -> Verdict:
    """The ledger's own checks: contiguous, nothing left planned, staging swept, cursors at the ends."""
    pipeline = spec.name
    verdict.problems += [f"ledger not contiguous: {p}" for p in ledger.contiguity_problems(pipeline)]
    if planned is not None and expect_drained:
        verdict.problems.append(f"batch {planned} is still planned after recovery")
    if running:
        verdict.notes.append(
            f"{len(running)} Spark attempts never finished (their worker was killed): "
            f"batches {sorted({int(b) for _, b in running})}"
        )
    _check_staging(ledger, spec, planned, verdict)

    if expect_drained and produced:
        ends: dict[int, int] = {}
        for p in produced:
            ends[p["partition"]] = max(ends.get(p["partition"], 0), p["offset"] + 1)
        found_cursors = {tp.partition: off for tp, off in cursors.items()}
        if any(found_cursors.get(part, 0) != ends.get(part, 0) for part in set(ends) | set(found_cursors)):
            verdict.problems.append(
                f"cursors {dict(sorted(found_cursors.items()))} are not at the produced ends "
                f"{dict(sorted(ends.items()))}"
            )
    return verdict
