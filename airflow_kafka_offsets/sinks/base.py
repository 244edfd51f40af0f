"""The seam between the batch steps and where batches land.

Plan, read and commit (service/plan.py, read.py, commit.py), the manual operations and the sweep talk to a sink
only through :class:`Sink`. One implementation per file: ``local.py`` (Parquet directories,
published by rename), ``iceberg.py`` and ``delta.py`` (tables, published by a table commit).

The contract every sink keeps, with the ledger's batch row locked by the caller:

- ``publish`` makes exactly one attempt's records the batch's records, and nothing else;
  publishing the same batch again replaces what the batch had (a replay), never adds to it.
- ``published_attempt`` tells which attempt a crash left published but not committed, so the
  next commit takes it as it is (no second Spark run, no duplicate).
- ``withdraw`` takes a published but never committed batch back out of readers' sight.
- ``discard_attempt`` never removes files the output still uses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec
from airflow_kafka_offsets.core.output_tables import RecordedTable

# The keys of a table commit's metadata that name the batch it holds (Iceberg snapshot summaries, Delta
# commit info), read back by the sinks to find a batch a crash left in a table.
PIPELINE_UID = "kafka-offsets.pipeline-uid"
BATCH = "kafka-offsets.batch"
ATTEMPT = "kafka-offsets.attempt"
OPERATION = "kafka-offsets.operation"
ABORT = "abort"  # the operation of a commit that took an aborted batch back out of a table


@dataclass(frozen=True)
class Publication:
    """One batch's attempt to make visible, and what a table records about it in its commit.

    ``attempt_id`` / ``staging_uri`` are None for a batch that reads no records; ``records`` is how
    many the attempt read. ``landed``: for one table of a batch of many, where its own records are
    (per topic partition: ``start``, ``end``, ``records``), which its commit then records instead of
    the batch's ranges (see :meth:`for_table`).
    """

    pipeline_uid: str
    plan: BatchPlan
    attempt_id: str | None
    staging_uri: str | None
    records: int
    decode: DecodeSpec | None
    replay: bool = False
    landed: tuple[Mapping[str, Any], ...] | None = None

    def for_table(self, records: int, landed: Sequence[Mapping[str, Any]] | None) -> Publication:
        """The publication as one table of a batch of many records it: that table's records and ranges
        (an attempt staged before reports named them: the batch's ranges)."""
        return replace(self, records=records, landed=tuple(landed) if landed is not None else None)

    def commit_properties(self) -> dict[str, str]:
        """Where a table's commit says which batch it holds (string values: Iceberg summaries need them)."""
        ranges = list(self.landed) if self.landed is not None else [r.to_json() for r in self.plan.ranges]
        return {
            "kafka-offsets.pipeline": self.plan.pipeline,
            PIPELINE_UID: self.pipeline_uid,
            BATCH: str(self.plan.batch_id),
            "kafka-offsets.epoch": str(self.plan.epoch),
            ATTEMPT: self.attempt_id or "",
            "kafka-offsets.records": str(self.records),
            OPERATION: "replay" if self.replay else "commit",
            "kafka-offsets.ranges": _compact_json(ranges),
        }


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class LedgerStatements(Protocol):
    """The open ledger transaction a batch is published in: a sink that commits inside it (Iceberg in the
    ledger's catalog) runs its catalog's statements there, so the table and the ledger commit together."""

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...

    def fetchone(self, sql: str, params: Sequence[Any] | None = None) -> tuple[Any, ...] | None: ...


class Sink(Protocol):
    """Where a pipeline's batches land (see the module docstring for the contract)."""

    def describe(self) -> dict[str, Any]:
        """The output for status and lineage: format, location, table."""
        ...

    def check_writable(self, decode: DecodeSpec | None) -> None:
        """Refuse an output that cannot take this pipeline's batches, before anything is planned."""
        ...

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        """Where readers find batch ``batch_id`` (a directory, or the table's location)."""
        ...

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        """Where one Spark attempt writes its files and its report."""
        ...

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        """The report a finished attempt wrote, or None if it did not finish."""
        ...

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """The attempt whose records the output holds for this batch now, if any."""
        ...

    def publish(self, tx: LedgerStatements, publication: Publication) -> dict[str, Any] | None:
        """Make the attempt the batch's records; ``tx`` is the open ledger transaction.

        An Iceberg sink, and a sink of many tables, returns what each table's commit produced (snapshot id
        or version, records, an Iceberg table's uuid, by table name) for the ledger's batch row; the other
        sinks return None."""
        ...

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Take back a published, never committed batch (abort); returns staging left to discard."""
        ...

    def in_use(self, staging_uri: str) -> bool:
        """The output (a table's history included) references this attempt's files."""
        ...

    def discard_attempt(self, staging_uri: str) -> None:
        """Remove an attempt's files, unless the output uses them."""
        ...

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        """Attempt locations found in storage, per batch id (for the sweep)."""
        ...

    def leftover_output(self, output_uri: str) -> str | None:
        """What an aborted batch left at its output location, to sweep (None: nothing, or a table)."""
        ...

    def remove_output(self, output_uri: str) -> bool:
        """Remove the leftover output of an aborted batch; True if there was one."""
        ...

    def exists(self, uri: str) -> bool: ...


@runtime_checkable
class ChecksReplay(Protocol):
    """A sink that can tell before Spark runs whether a committed batch's replay could be published."""

    def check_replay(self, pipeline_uid: str, plan: BatchPlan) -> None:
        """Refuse the replay of ``plan`` in place (:class:`~airflow_kafka_offsets.errors.MergeOperationRefusedError`)
        when its publication would be; nothing is read or written before."""
        ...


@runtime_checkable
class RewritesInSpark(Protocol):
    """A mirror sink whose data files Spark rewrites with the batch (Iceberg, Delta): the job lists them."""

    def rewrite_base(self) -> dict[str, Any] | None:
        """The job's ``merge.rewrite`` (``spark_apps/kafka_batch_contract.py``), or None when the sink has none to
        give (an appending table)."""
        ...


@runtime_checkable
class ChecksTables(Protocol):
    """A sink of Iceberg tables, which records each table's uuid with the batches committed to it."""

    def check_tables(self, recorded: Mapping[str, RecordedTable]) -> None:
        """Refuse a table someone else dropped or replaced since the batch that last committed to it
        (:class:`~airflow_kafka_offsets.errors.OutputTableChangedError`), before anything is planned."""
        ...
