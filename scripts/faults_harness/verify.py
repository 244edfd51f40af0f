"""What a reader that follows the ledger sees, checked against what was produced.

A reader reads the ``output_uri`` of every committed batch and nothing else.
After a trial it must find every produced id exactly once, at the partition
and offset Kafka acknowledged, inside the ranges of the batch that holds it;
the ledger must be contiguous with no batch left planned; and no directory
under ``<output_root>/<pipeline>/`` may exist that is not a committed batch's
output (the output of the batch still planned is tolerated: a reader does not
look there, and the replay replaces it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.parquet as pq

from airflow_kafka_offsets.core.model import TopicPartition
from airflow_kafka_offsets.ledger import Ledger


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

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.problems)

    def summary(self) -> str:
        return (
            f"{self.batches} committed batches, {self.read} records read for {self.produced} produced: "
            f"lost {self.lost}, duplicated {self.duplicated}, unexpected {self.unexpected}"
        )


def verify(
    ledger: Ledger, pipeline: str, output_root: str, produced: list[dict], *, expect_drained: bool = True
) -> Verdict:
    """``produced``: {"id", "partition", "offset"} of every acknowledged record of the pipeline's topic."""
    verdict = Verdict(produced=len(produced))
    committed = [b for b in ledger.committed_batches(pipeline) if b.plan.output_uri]
    verdict.batches = len(committed)
    copies: Counter[str] = Counter()
    where: dict[str, tuple[int, int]] = {}
    for record in committed:
        plan = record.plan
        path = local_path(plan.output_uri)
        if not plan.readable_ranges:
            continue
        if not path.is_dir():
            verdict.problems.append(f"batch {plan.batch_id} is committed but its output {path} is missing")
            continue
        rows = pq.read_table(path, columns=["key", "topic", "partition", "offset"]).to_pylist()
        verdict.read += len(rows)
        if record.records_committed is not None and len(rows) != record.records_committed:
            verdict.problems.append(
                f"batch {plan.batch_id}: ledger says {record.records_committed} records, its output holds {len(rows)}"
            )
        ranges = {r.topic_partition: r for r in plan.ranges}
        outside = 0
        for row in rows:
            rng = ranges.get(TopicPartition(row["topic"], int(row["partition"])))
            if rng is None or not rng.start <= row["offset"] < rng.end:
                outside += 1
            key = row["key"].decode()
            copies[key] += 1
            where[key] = (int(row["partition"]), int(row["offset"]))
        if outside:
            verdict.problems.append(f"batch {plan.batch_id}: {outside} records outside its planned ranges")

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

    verdict.problems += [f"ledger not contiguous: {p}" for p in ledger.contiguity_problems(pipeline)]
    with ledger.transaction() as tx:
        planned = tx.planned_batch_id(pipeline)
        planned_uri = tx.batch(pipeline, planned).plan.output_uri if planned is not None else None
        running = tx.fetchall(
            "SELECT attempt_id, batch_id FROM {s}.attempts WHERE pipeline = %s AND state = 'running'", (pipeline,)
        )
        cursors = tx.cursors(pipeline)
    if planned is not None and expect_drained:
        verdict.problems.append(f"batch {planned} is still planned after recovery")
    if running:
        verdict.notes.append(
            f"{len(running)} Spark attempts never finished (their worker was killed): "
            f"batches {sorted({int(b) for _, b in running})}"
        )

    visible_ok = {local_path(b.plan.output_uri) for b in committed}
    if planned_uri:
        visible_ok.add(local_path(planned_uri))
    pipeline_dir = Path(output_root) / pipeline
    if pipeline_dir.is_dir():
        stray = sorted(p.name for p in pipeline_dir.iterdir() if p not in visible_ok)
        if stray:
            verdict.problems.append(f"outside committed batches under {pipeline_dir}: {', '.join(stray)}")
    staging = Path(output_root) / "_staging" / pipeline
    if staging.is_dir():
        left = sorted(p.name for p in staging.iterdir())
        if left:
            verdict.notes.append(f"staging left behind (not visible to readers): {', '.join(left)}")

    if expect_drained and produced:
        ends: dict[int, int] = {}
        for p in produced:
            ends[p["partition"]] = max(ends.get(p["partition"], 0), p["offset"] + 1)
        found = {tp.partition: off for tp, off in cursors.items()}
        if any(found.get(part, 0) < end for part, end in ends.items()):
            verdict.problems.append(
                f"cursors {dict(sorted(found.items()))} short of the produced ends {dict(sorted(ends.items()))}"
            )
    return verdict
