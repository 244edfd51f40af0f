"""Compact per-partition tables for task logs and the CLI."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, PartitionOffsets, PartitionRange, TopicPartition


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(map(len, column)) for column in zip(*cells)]
    line = "  ".join(f"{{:{'>' if i else '<'}{w}}}" for i, w in enumerate(widths))
    lines = [line.format(*row) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# A column of a table of JSON rows: its header, and the row's key or a function of the row.
Column = tuple[str, str | Callable[[Mapping[str, Any]], object]]


def rows_table(columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> str:
    """A table of JSON rows (a status's partitions, batches, attempts), one column a key or a function."""
    return render_table(
        [header for header, _ in columns],
        [[cell(row) if callable(cell) else row[cell] for _, cell in columns] for row in rows],
    )


def abort_table(plan: BatchPlan) -> str:
    """An abort's before and after: the planned batch's ranges, which stay in the ledger as aborted."""
    return render_table(
        ["batch", "partition", "range", "before", "after"],
        [
            [plan.batch_id, f"{r.topic}-{r.partition}", f"[{r.start}, {r.end})", "planned", "aborted"]
            for r in plan.ranges
        ],
    )


def partition_table(
    ranges: Sequence[PartitionRange],
    *,
    offsets: Mapping[TopicPartition, PartitionOffsets] | None = None,
    report: BatchReport | None = None,
) -> str:
    """One row per partition: planned range, and Kafka's bounds or what was read when known."""
    read = {p.topic_partition: p for p in report.partitions} if report else {}
    headers = ["partition", "start", "end", "planned"]
    if offsets is not None:
        headers += ["log start", "log end", "lag after"]
    if report is not None:
        headers += ["read", "min offset", "max offset"]
    headers += ["lost"]
    rows = []
    for r in ranges:
        row: list[object] = [str(r.topic_partition), r.start, r.end, r.span]
        if offsets is not None:
            kafka = offsets.get(r.topic_partition)
            row += [kafka.earliest, kafka.latest, kafka.latest - r.end] if kafka else ["?", "?", "?"]
        if report is not None:
            part = read.get(r.topic_partition)
            row += [part.records, part.min_offset, part.max_offset] if part else [0, None, None]
        row.append(r.lost or "")
        rows.append(row)
    return render_table(headers, rows)


@dataclass(frozen=True)
class LoggedPartitionTable:
    """A partition_table for a log line, rendered only if the line is emitted (10,000 rows take 0.1 s)."""

    ranges: Sequence[PartitionRange]
    offsets: Mapping[TopicPartition, PartitionOffsets] | None = None
    report: BatchReport | None = None

    def __str__(self) -> str:
        return partition_table(self.ranges, offsets=self.offsets, report=self.report)
