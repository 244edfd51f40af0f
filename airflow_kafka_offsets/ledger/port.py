"""The ledger as the batch steps see it: what plan, read, commit, attempts, leases, aborts and resets call.

Two ledgers implement it: :class:`~airflow_kafka_offsets.ledger.store.Ledger` on PostgreSQL and
:class:`~airflow_kafka_offsets.ledger.memory.MemoryLedger` in memory (for tests of the exactly-once
state machine and of DAG code without a database). mypy checks both against these protocols; one
contract test suite runs against both. Reports, pages and the other manual operations use more of
the PostgreSQL ledger than this and take it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, DecodeSpec, PipelineSpec, TopicPartition
from airflow_kafka_offsets.core.output_tables import RecordedTable
from airflow_kafka_offsets.core.resets import PartitionReset
from airflow_kafka_offsets.ledger.attempts import Attempt
from airflow_kafka_offsets.ledger.batches import BatchRecord
from airflow_kafka_offsets.ledger.sql import Row


class LedgerTransactionPort(Protocol):
    """One open ledger transaction: everything in it commits together or not at all.

    Row locks taken in it (a pipeline's, a batch's) are held until it ends; a transaction that
    cannot get one within the ledger's lock timeout raises
    :class:`~airflow_kafka_offsets.errors.PipelineBusyError`.
    """

    # pipelines and cursors
    def lock_pipeline(self, spec: PipelineSpec) -> tuple[int, int]: ...
    def lock_existing_pipeline(self, pipeline: str) -> tuple[int, int]: ...
    def pipeline_spec(self, pipeline: str) -> PipelineSpec: ...
    def pipeline_uid(self, pipeline: str) -> str: ...
    def cursors(self, pipeline: str) -> dict[TopicPartition, int]: ...

    # batches: write-ahead plans (I2), aborts, what is committed (I1)
    def planned_batch_id(self, pipeline: str) -> int | None: ...
    def insert_plan(self, plan: BatchPlan, new_cursors: Mapping[TopicPartition, int], actor: Actor) -> None: ...
    def batch(self, pipeline: str, batch_id: int, *, for_update: bool = False) -> BatchRecord: ...
    def abort_batch(self, pipeline: str, batch_id: int, reason: str, actor: Actor) -> None: ...
    def committed_batch_ids(self, pipeline: str) -> list[int]: ...
    def contiguity_problems(self, pipeline: str) -> list[str]: ...
    def recorded_tables(self, pipeline: str) -> dict[str, RecordedTable]: ...

    # the decoding a batch was planned with
    def record_batch_decode(self, pipeline: str, batch_id: int, decode: DecodeSpec) -> None: ...
    def batch_decode(self, pipeline: str, batch_id: int) -> DecodeSpec | None: ...
    def last_recorded_decode(self, pipeline: str) -> tuple[int, DecodeSpec] | None: ...

    # Spark attempts and their leases
    def start_attempt(
        self, plan: BatchPlan, attempt_id: str, staging_uri: str, actor: Actor, lease_s: float
    ) -> None: ...
    def renew_lease(self, attempt_id: str, lease_s: float) -> bool: ...
    def finish_attempt(
        self, attempt_id: str, report: BatchReport | None, error: str | None, root_cause: str | None = None
    ) -> bool: ...
    def mark_dead_attempts(
        self, pipeline: str, batch_id: int | None = None, superseded_by: Actor | None = None
    ) -> list[str]: ...
    def attempts(self, pipeline: str, batch_ids: Sequence[int], *, reports: bool = True) -> list[Attempt]: ...
    def latest_succeeded_attempt(self, pipeline: str, batch_id: int, *, report: bool = True) -> Attempt | None: ...

    # the commit: a compare-and-set of the cursors in the transaction that marks the batch committed (I3)
    def store_counts(self, plan: BatchPlan, attempt_id: str | None) -> tuple[int, int]: ...
    def advance_cursors(self, plan: BatchPlan) -> None: ...
    def record_commit(
        self,
        plan: BatchPlan,
        attempt_id: str | None,
        records: int,
        output_bytes: int,
        actor: Actor,
        tables: Mapping[str, Any] | None = None,
    ) -> None: ...

    # resets: a deliberate skip or rewind, recorded (I1)
    def apply_reset(
        self, pipeline: str, resets: Sequence[PartitionReset], detail: Mapping[str, Any], actor: Actor
    ) -> int: ...

    def audit(
        self, pipeline: str, batch_id: int | None, event: str, detail: Mapping[str, Any], actor: Actor
    ) -> None: ...

    # statements of a sink that commits inside the ledger's transaction (Iceberg in the ledger's catalog)
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...
    def fetchone(self, sql: str, params: Sequence[Any] | None = None) -> Row | None: ...


class LedgerPort(Protocol):
    """A ledger: transactions, and a batch or the cursors read in a transaction of their own."""

    def transaction(self, read_only: bool = False) -> AbstractContextManager[LedgerTransactionPort]: ...
    def batch(self, pipeline: str, batch_id: int) -> BatchRecord: ...
    def cursors(self, pipeline: str) -> dict[TopicPartition, int]: ...


class OwnTransactionReads:
    """:class:`LedgerPort`'s ``batch`` and ``cursors``, each read in a transaction of its own: one body for
    both ledgers."""

    def transaction(self, read_only: bool = False) -> AbstractContextManager[LedgerTransactionPort]:
        raise NotImplementedError

    def batch(self, pipeline: str, batch_id: int) -> BatchRecord:
        with self.transaction() as tx:
            return tx.batch(pipeline, batch_id)

    def cursors(self, pipeline: str) -> dict[TopicPartition, int]:
        with self.transaction() as tx:
            return tx.cursors(pipeline)
