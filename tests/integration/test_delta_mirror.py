"""Mirror tables (merge mode) on Delta, on the real stack: change events in Kafka, Spark's change set and its
rewrites of the files holding a changed key, one Delta commit per batch carrying the batch's app transaction,
read back with delta-rs (which knows nothing of the ledger) and compared with the source's model after every
batch (``cdc_source.Source``).

Delta's log is not the ledger's transaction: a crash between the two leaves the merge in the table and
the batch planned; the retry finds the app transaction and commits the ledger alone, and an abort
restores the version before the merge. The Iceberg mirror's tests: test_mirror_tables.py.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableMerger

from airflow_kafka_offsets.core.model import BatchState, PipelineSpec, batch_directory
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.errors import MergeOperationRefusedError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.replay import replay_batch
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.sinks.delta import app_id
from airflow_kafka_offsets.sinks.delta_merge import PUTS_DIR
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REWRITES_DIR
from faults_harness import lake_readers

from .cdc_source import Source, first_changes, mirror, mirror_spec, moving_changes, two_random_batches
from .helpers import refused
from .pipeline import commit, commit_dies_at, operation_context, plan, read, run_once, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


def table(spec: PipelineSpec) -> DeltaTable:
    return lake_readers.delta_table(spec)


def foreign_row(spec: PipelineSpec, id_: int) -> None:
    """Another writer appends a row of key ``id_`` (a backfill, a repair)."""
    schema = pa.schema(table(spec).schema())
    row = {f.name: None for f in schema} | {"id": id_, "name": "foreign"}
    write_deltalake(table(spec).table_uri, pa.Table.from_pylist([row], schema=schema), mode="append")


def staged_batch(ledger: Ledger, spec: PipelineSpec, stack) -> int:
    """Plan and read the next batch (Spark staged it and its change set), not committed."""
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    return outcome.plan.batch_id


def crashed_commit(ledger: Ledger, spec: PipelineSpec, batch: int, point: str) -> int:
    """Let the batch's commit die at ``point``: the merge is in the table, the batch still planned; returns
    the table's version then."""
    commit_dies_at(ledger, spec, batch, point)
    assert ledger.batch(spec.name, batch).state is BatchState.PLANNED
    return table(spec).version()


def test_a_delta_mirror_equals_the_source_after_every_batch_through_crashes_and_other_writers(
    stack, ledger, make_topic, tmp_path, monkeypatch
):
    topic = make_topic(partitions=2)
    spec = mirror_spec("mirror_dbz", topic, str(tmp_path / "lake"), "delta")
    source = Source(stack.bootstrap_servers, topic)

    # batch 1: inserts, an update, and a row inserted and deleted within the batch
    first_changes(source)
    assert run_once(ledger, spec, stack).records == 14  # with the tombstone after the delete
    assert mirror(stack, ledger, spec) == source.expected and len(source.expected) == 10
    with ledger.transaction() as tx:
        uid = tx.pipeline_uid(spec.name)
    last = table(spec).history(1)[0]
    assert (last["operation"], last["kafka-offsets.batch"], last["kafka-offsets.operation"]) == ("WRITE", "1", "commit")
    assert table(spec).transaction_version(app_id(uid)) == 1

    # batch 2 (the embedded-schema form): a delete then re-insert, a primary key change, a delete; the commit
    # dies after the Delta commit, before the ledger's: the table holds the merge, the retry does not merge again
    moving_changes(source, range(100, 106))
    batch = staged_batch(ledger, spec, stack)
    version = crashed_commit(ledger, spec, batch, "after_publish")
    assert mirror(stack, ledger, spec) == source.expected  # Delta's log commits before the ledger
    assert commit(ledger, spec, batch).committed_now
    assert table(spec).version() == version and mirror(stack, ledger, spec) == source.expected

    # batch 3: the commit dies inside the ledger's transaction (cursor advanced, batch marked committed)
    source.update(105, qty=0)
    source.delete(1)
    source.flush()
    batch = staged_batch(ledger, spec, stack)
    version = crashed_commit(ledger, spec, batch, "in_commit_transaction")
    assert commit(ledger, spec, batch).committed_now
    assert table(spec).version() == version and mirror(stack, ledger, spec) == source.expected
    # Spark rewrote the file that held key 1 (and 105); the commit swapped it in, with the put of 105
    batch_files = [p for p in table(spec).file_uris() if f"/{batch_directory(batch)}/" in p]
    assert {p.split("/")[-3 if REWRITES_DIR in p else -2] for p in batch_files} == {REWRITES_DIR, PUTS_DIR}
    assert table(spec).history(1)[0]["operation"] == "WRITE"

    source.with_schema = False
    source.update(105, name="changed")
    source.delete(2)
    source.flush()
    # batch 4: another writer appends while Spark's rewrites are swapped in: the swap must be the version right
    # after Spark's base, so it is refused, and the change set is merged on the table as it is then (delta-rs
    # MERGE); a compaction commits while that merge runs: its commit conflicts, and it is merged again
    batch = staged_batch(ledger, spec, stack)
    execute, merges, create, swaps = TableMerger.execute, [], DeltaTable.create_write_transaction, []

    def another_writer_first(delta: DeltaTable, *args, **kwargs) -> None:
        if not swaps:
            foreign_row(spec, 999)
        swaps.append(delta)
        return create(delta, *args, **kwargs)

    def compaction_during_the_merge(merger: TableMerger) -> dict:
        if not merges:
            table(spec).optimize.compact()
        merges.append(merger)
        return execute(merger)

    with monkeypatch.context() as patched:
        patched.setattr(DeltaTable, "create_write_transaction", another_writer_first)
        patched.setattr(TableMerger, "execute", compaction_during_the_merge)
        commit(ledger, spec, batch)
    history = table(spec).history(2)
    assert len(swaps) == 1 and len(merges) == 2 and history[1]["operation"] == "OPTIMIZE"
    assert history[0]["kafka-offsets.batch"] == str(batch) and history[0]["readVersion"] == history[1]["version"]
    found = mirror(stack, ledger, spec)
    assert found.pop(999)["name"] == "foreign" and found == source.expected


def test_a_delta_mirror_of_a_random_workload_replays_its_latest_batch_and_aborts_a_crashed_merge(
    stack, ledger, make_topic, tmp_path
):
    """Many keys changed many times per batch (last change wins across 3 partitions); replay of the latest
    batch and refusal of an older one; abort of a merge a crash left, refused once another commit follows it."""
    topic = make_topic(partitions=3)
    spec = mirror_spec("mirror_random", topic, str(tmp_path / "lake"), "delta")
    source, rng = two_random_batches(stack, ledger, spec, 300)

    ctx = operation_context(ledger, stack, submitter(stack))
    with refused(MergeOperationRefusedError, r"only the latest batch \(2\) replays"):
        replay_batch(ctx, spec.name, 1)
    files_before = set(table(spec).file_uris())
    replay_batch(ctx, spec.name, 2)  # one merge again, on the state batch 2 left: the same rows
    assert mirror(stack, ledger, spec) == source.expected
    assert set(table(spec).file_uris()) != files_before  # rewritten, not left alone
    assert table(spec).history(1)[0]["kafka-offsets.operation"] == "replay"

    # a merge a crash left in the table is taken back by an abort; the next batch reads its changes again
    before = mirror(stack, ledger, spec)
    source.random_wave(rng, 40, "w2")
    crashed_commit(ledger, spec, staged_batch(ledger, spec, stack), "after_publish")
    assert mirror(stack, ledger, spec) == source.expected != before
    abort_planned_batch(ctx, spec.name, "gave up after the crash")
    assert mirror(stack, ledger, spec) == before
    assert table(spec).history(1)[0]["operation"] == "RESTORE"

    # the next batch reads the aborted changes again; once another writer committed after its merge, its
    # abort is refused and the batch stays committable
    batch = staged_batch(ledger, spec, stack)
    crashed_commit(ledger, spec, batch, "after_publish")
    foreign_row(spec, 10**6)
    with refused(MergeOperationRefusedError, "restoring the version before it would lose them"):
        abort_planned_batch(ctx, spec.name, "too late")
    assert commit(ledger, spec, batch).committed_now
    found = mirror(stack, ledger, spec)
    assert found.pop(10**6)["name"] == "foreign" and found == source.expected
    # the other writer's rows came after the batch's merge: its replay is refused before any Spark job, the
    # ledger (no attempt) and the table as they were
    with ledger.transaction(read_only=True) as tx:
        attempts = [a.attempt_id for a in tx.attempts(spec.name, [batch], reports=False)]
    version = table(spec).version()
    with refused(
        MergeOperationRefusedError, r"commits after the batch's that change its rows .*Nothing was read or written"
    ):
        replay_batch(ctx, spec.name, batch)
    with ledger.transaction(read_only=True) as tx:
        assert [a.attempt_id for a in tx.attempts(spec.name, [batch], reports=False)] == attempts
    assert table(spec).version() == version

    with refused(MergeOperationRefusedError, "only skip forward"):
        reset_offsets(operation_context(ledger, stack), spec.name, ResetRequest(ResetMode.TO_EARLIEST), dry_run=False)
