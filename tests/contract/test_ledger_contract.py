"""One contract, two ledgers: the PostgreSQL ledger and the in-memory one hold the same rows after the same
steps and refuse the same things with the same exception classes."""

from __future__ import annotations

import re
import threading

import psycopg2
import pytest

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import (
    BatchPlan,
    BatchState,
    DecodeSpec,
    PartitionRange,
    PipelineSpec,
    TopicPartition,
)
from airflow_kafka_offsets.core.resets import PartitionReset
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import (
    BatchNotFoundError,
    BatchStateError,
    CursorMovedError,
    PipelineBusyError,
    PipelineSpecMismatchError,
)
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch

from .conftest import World

ACTOR = Actor.from_json({"test": "contract"})
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def spec_of(**options: object) -> PipelineSpec:
    return build_spec("p", ["t"], "memory://out", **options)  # type: ignore[arg-type]


def produce(world: World, per_partition: dict[int, int]) -> None:
    world.kafka.create_topic("t", max(per_partition) + 1)
    for partition, n in per_partition.items():
        world.kafka.produce("t", partition, *(f"{partition}:{i}".encode() for i in range(n)))


def plan(world: World, spec: PipelineSpec) -> BatchPlan:
    outcome = plan_batch(world.ledger, spec, world.kafka, world.sink, ACTOR)
    assert outcome.plan is not None
    return outcome.plan


def ingest(world: World, spec: PipelineSpec) -> BatchPlan:
    """One batch through plan, read and commit."""
    planned = plan(world, spec)
    run_batch(world.ledger, world.sink, planned, world.spark, {}, ACTOR, wait_s=0)
    assert commit_batch(world.ledger, world.sink, "p", planned.batch_id, ACTOR).committed_now
    return planned


def test_a_plan_is_written_ahead_and_replayed_unchanged(world: World):
    produce(world, {0: 10, 1: 3})
    spec = spec_of(max_records_per_partition=4)
    first = plan_batch(world.ledger, spec, world.kafka, world.sink, ACTOR)
    assert not first.replayed and first.plan is not None
    assert first.plan.ranges == (PartitionRange("t", 0, 0, 4, 0), PartitionRange("t", 1, 0, 3, 0))
    world.kafka.produce("t", 0, b"late")  # new records do not change a planned batch (I2)
    again = plan_batch(world.ledger, spec, world.kafka, world.sink, ACTOR)
    assert again.replayed and again.plan == first.plan
    record = world.ledger.batch("p", 1)
    assert (record.state, record.plan, record.committed_at, record.records_committed) == (
        BatchState.PLANNED,
        first.plan,
        None,
        None,
    )
    assert world.ledger.cursors("p") == {T0: 0, T1: 0}  # first-seen partitions start at the plan's start
    assert world.audit("p") == [
        (1, "planned", {"records_planned": 7, "partitions": 2, "new_partitions": {"t-0": 0, "t-1": 0}}),
        (1, "replayed", {}),
    ]


def test_nothing_new_plans_nothing(world: World):
    produce(world, {0: 2})
    ingest(world, spec_of())
    assert plan_batch(world.ledger, spec_of(), world.kafka, world.sink, ACTOR).plan is None
    with world.ledger.transaction() as tx:
        assert tx.planned_batch_id("p") is None
        assert tx.lock_pipeline(spec_of()) == (0, 2)


def test_commit_moves_the_cursor_exactly_and_publishes_the_records(world: World):
    produce(world, {0: 5, 1: 2})
    world.kafka.commit_marker("t", 1)
    first = ingest(world, spec_of())
    assert world.ledger.cursors("p") == {T0: 5, T1: 3}
    record = world.ledger.batch("p", 1)
    assert (record.state, record.records_committed, record.committed_by) == (BatchState.COMMITTED, 7, ACTOR)
    assert world.sink.committed_records([first.output_uri]) == [("t", 0, i, f"0:{i}".encode()) for i in range(5)] + [
        ("t", 1, i, f"1:{i}".encode()) for i in range(2)
    ]
    produce(world, {0: 0, 1: 1})  # offset 3 of t-1 (after the marker at 2)
    second = ingest(world, spec_of())
    assert second.ranges == (PartitionRange("t", 0, 5, 5, 5), PartitionRange("t", 1, 3, 4, 3))
    assert world.ledger.cursors("p") == {T0: 5, T1: 4}
    with world.ledger.transaction() as tx:
        assert tx.committed_batch_ids("p") == [1, 2]
        assert tx.contiguity_problems("p") == []
    assert [e for _, e, _ in world.audit("p")] == ["planned", "committed", "planned", "committed"]
    assert world.audit("p")[1] == (1, "committed", {"records": 7})


def test_a_second_commit_of_a_batch_is_refused_by_the_compare_and_set(world: World):
    produce(world, {0: 4})
    done = ingest(world, spec_of())
    again = commit_batch(world.ledger, world.sink, "p", done.batch_id, ACTOR)
    assert (again.committed_now, again.records) == (False, 4)
    with pytest.raises(CursorMovedError, match=re.escape("cannot commit: cursor moved (t-0 expected 0 found 4)")):
        with world.ledger.transaction() as tx:
            tx.advance_cursors(done)
    assert world.ledger.cursors("p") == {T0: 4}
    assert [e for _, e, _ in world.audit("p")] == ["planned", "committed"]


def test_overlapping_ranges_and_a_second_planned_batch_are_refused(world: World):
    produce(world, {0: 10})
    done = ingest(world, spec_of())
    world.kafka.produce("t", 0, b"x")
    planned = plan(world, spec_of())
    assert planned.ranges == (PartitionRange("t", 0, 10, 11, 10),)
    with pytest.raises(psycopg2.errors.UniqueViolation, match="batches_one_planned"):
        with world.ledger.transaction() as tx:
            tx.insert_plan(BatchPlan("p", 9, 0, (PartitionRange("t", 0, 11, 12, 11),), "memory://x"), {}, ACTOR)
    with world.ledger.transaction() as tx:
        tx.abort_batch("p", planned.batch_id, "to test overlaps", ACTOR)
    overlapping = BatchPlan("p", 3, 0, (PartitionRange("t", 0, 5, 11, 5),), "memory://x")
    with pytest.raises(psycopg2.errors.ExclusionViolation, match=r"\[5,11\)\) conflicts .*=\(p, 0, t, 0, \[0,10\)\)"):
        with world.ledger.transaction() as tx:
            tx.insert_plan(overlapping, {}, ACTOR)
    with world.ledger.transaction() as tx:  # the aborted batch's range is no longer live: planning it again is fine
        tx.insert_plan(BatchPlan("p", 3, 0, (PartitionRange("t", 0, 10, 11, 10),), "memory://x"), {}, ACTOR)
        assert tx.planned_batch_id("p") == 3
    assert done.batch_id == 1


def test_abort_keeps_the_cursor_and_the_range_is_planned_again(world: World):
    produce(world, {0: 3})
    first = plan(world, spec_of())
    with world.ledger.transaction() as tx:
        tx.abort_batch("p", first.batch_id, "bad data", ACTOR)
    with pytest.raises(BatchStateError, match="batch 1 of 'p' is aborted, not planned"):
        with world.ledger.transaction() as tx:
            tx.abort_batch("p", first.batch_id, "again", ACTOR)
    assert world.ledger.batch("p", 1).state is BatchState.ABORTED
    assert world.ledger.cursors("p") == {T0: 0}
    second = plan(world, spec_of())
    assert (second.batch_id, second.ranges) == (2, first.ranges)
    assert world.audit("p")[1] == (1, "aborted", {"reason": "bad data"})


def test_resets_forward_and_backward_are_recorded(world: World):
    produce(world, {0: 10})
    ingest(world, spec_of(max_records_per_batch=4))  # [0, 4)
    with world.ledger.transaction() as tx:
        tx.lock_existing_pipeline("p")
        skip = tx.apply_reset("p", [PartitionReset("t", 0, 4, 7)], {"mode": "to-offset"}, ACTOR)
    assert world.ledger.cursors("p") == {T0: 7}
    skipped = world.ledger.batch("p", skip)
    assert (skipped.state, skipped.plan.epoch, skipped.plan.ranges) == (
        BatchState.COMMITTED,
        0,
        (PartitionRange("t", 0, 7, 7, 4),),
    )
    with world.ledger.transaction() as tx:
        rewind = tx.apply_reset("p", [PartitionReset("t", 0, 7, 2)], {"mode": "to-offset"}, ACTOR)
        assert tx.contiguity_problems("p") == []
    assert world.ledger.cursors("p") == {T0: 2}
    back = world.ledger.batch("p", rewind)
    assert (back.plan.epoch, back.plan.ranges) == (1, (PartitionRange("t", 0, 2, 2, 2),))
    again = ingest(world, spec_of(max_records_per_batch=4))  # the rewound span is read again, in epoch 1
    assert (again.epoch, again.ranges) == (1, (PartitionRange("t", 0, 2, 6, 2),))
    assert [(b, e, d.get("rewind"), d.get("epoch")) for b, e, d in world.audit("p") if e == "reset"] == [
        (2, "reset", False, 0),
        (3, "reset", True, 1),
    ]
    with world.ledger.transaction() as tx:
        assert tx.committed_batch_ids("p") == [1, 2, 3, 4]
        assert tx.contiguity_problems("p") == []


def test_attempts_leases_and_their_expiry(world: World):
    produce(world, {0: 2})
    planned = plan(world, spec_of())
    with world.ledger.transaction() as tx:
        tx.start_attempt(planned, "live", "memory://s/live", ACTOR, 600)
        tx.start_attempt(planned, "gone", "memory://s/gone", ACTOR, 0)
    with world.ledger.transaction() as tx:
        assert tx.mark_dead_attempts("p", planned.batch_id) == ["gone"]
        assert tx.renew_lease("live", 600) and not tx.renew_lease("gone", 600)
        assert not tx.finish_attempt("gone", None, "too late")
    with world.ledger.transaction() as tx:
        shown = {a.attempt_id: (a.state, a.live, a.shown_state) for a in tx.attempts("p", [planned.batch_id])}
        dead = next(a for a in tx.attempts("p", [planned.batch_id]) if a.attempt_id == "gone")
        assert tx.latest_succeeded_attempt("p", planned.batch_id) is None
    assert shown == {"live": ("running", True, "live"), "gone": ("dead", False, "dead")}
    assert dead.error is not None and dead.error.startswith("lease expired at ")
    with pytest.raises(PipelineBusyError, match="is being read by attempt live"):
        run_batch(world.ledger, world.sink, planned, world.spark, {}, ACTOR, wait_s=0, poll_s=0)
    with world.ledger.transaction() as tx:
        assert tx.finish_attempt("live", None, "Spark failed")
    report = run_batch(world.ledger, world.sink, planned, world.spark, {}, ACTOR, wait_s=0)
    assert report is not None and report.records == 2
    with world.ledger.transaction() as tx:
        states = sorted(a.state for a in tx.attempts("p", [planned.batch_id]))
        latest = tx.latest_succeeded_attempt("p", planned.batch_id)
    assert states == ["dead", "failed", "succeeded"]
    assert latest is not None and latest.report == report and world.spark.jobs == 1


def test_a_second_transaction_wanting_the_same_pipeline_is_busy(world: World):
    produce(world, {0: 1})
    planned = plan(world, spec_of())
    with world.ledger.transaction() as first:
        first.lock_existing_pipeline("p")
        with pytest.raises(PipelineBusyError, match="waiting for a ledger lock held by another run"):
            with world.ledger.transaction() as second:
                second.lock_pipeline(spec_of())
        first.batch("p", planned.batch_id, for_update=True)
        failures: list[BaseException] = []

        def commit_elsewhere() -> None:
            try:
                commit_batch(world.ledger, world.sink, "p", planned.batch_id, ACTOR)
            except BaseException as exc:
                failures.append(exc)

        worker = threading.Thread(target=commit_elsewhere)
        worker.start()
        worker.join()
        assert [type(f) for f in failures] == [PipelineBusyError]
    with world.ledger.transaction() as tx:  # the locks ended with their transaction
        assert tx.lock_existing_pipeline("p") == (0, 2)


def test_a_failed_transaction_leaves_nothing(world: World):
    produce(world, {0: 3})
    with pytest.raises(RuntimeError, match="crash"):
        with world.ledger.transaction() as tx:
            tx.lock_pipeline(spec_of())
            tx.insert_plan(BatchPlan("p", 1, 0, (PartitionRange("t", 0, 0, 3, 0),), "memory://x"), {T0: 0}, ACTOR)
            raise RuntimeError("crash")
    with world.ledger.transaction() as tx:
        assert tx.planned_batch_id("p") is None and tx.cursors("p") == {}
        with pytest.raises(BatchNotFoundError, match="pipeline 'p' has no batch 1"):
            tx.batch("p", 1)
    assert world.audit("p") == []


def test_a_changed_spec_is_refused(world: World):
    produce(world, {0: 1})
    plan(world, spec_of())
    with pytest.raises(PipelineSpecMismatchError, match="max_records_per_batch"):
        with world.ledger.transaction() as tx:
            tx.lock_pipeline(spec_of(max_records_per_batch=5))


def test_a_batch_keeps_the_decoding_it_was_planned_with(world: World):
    produce(world, {0: 1})
    planned = plan(world, spec_of())
    decode = DecodeSpec(schema="id STRING")
    with world.ledger.transaction() as tx:
        assert tx.batch_decode("p", planned.batch_id) is None and tx.last_recorded_decode("p") is None
        tx.record_batch_decode("p", planned.batch_id, decode)
    with world.ledger.transaction() as tx:
        assert tx.batch_decode("p", planned.batch_id) == decode
        assert tx.last_recorded_decode("p") == (planned.batch_id, decode)
        tx.abort_batch("p", planned.batch_id, "x", ACTOR)
        with pytest.raises(BatchNotFoundError, match="no planned batch 1 to record its decoding with"):
            tx.record_batch_decode("p", planned.batch_id, decode)


def test_a_read_only_transaction_writes_nothing(world: World):
    with pytest.raises(psycopg2.errors.ReadOnlySqlTransaction):
        with world.ledger.transaction(read_only=True) as tx:
            tx.lock_pipeline(spec_of())
