"""Model-based test of the exactly-once state machine on the in-memory ledger.

Hypothesis drives random interleavings of two workers running the batch steps (plan, read, commit,
replays), crashes at every named crash point, workers dying while Spark runs, leases running out,
aborts, resets (forward and back, and a rogue one that ignores the planned batch, which only the
commit's compare-and-set stops) and records arriving in Kafka. After every step the invariants of
the design (I1-I4, and exactly once in the output) are checked against the ledger, Kafka and the sink.

``AKO_MODEL_EXAMPLES`` / ``AKO_MODEL_STEPS`` run more histories than the fast loop does.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import psycopg2
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from airflow_kafka_offsets.clients.memory import MemoryKafka
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchPlan, BatchState, PipelineSpec, TopicPartition
from airflow_kafka_offsets.core.resets import PartitionReset
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BatchStateError, CursorMovedError, PipelineBusyError
from airflow_kafka_offsets.ledger import BatchRecord
from airflow_kafka_offsets.ledger.memory import ManualClock, MemoryLedger
from airflow_kafka_offsets.service import faults
from airflow_kafka_offsets.service.attempts import discard_ended_attempts
from airflow_kafka_offsets.service.attempts import start_attempt as start_attempt_in
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks.memory import MemorySink, MemorySpark

PARTITIONS = 2
LEASE_S = 60.0
EXAMPLES = int(os.environ.get("AKO_MODEL_EXAMPLES", "1000"))
STEPS = int(os.environ.get("AKO_MODEL_STEPS", "25"))
WORKERS = st.sampled_from([0, 1])
T = TypeVar("T")


class Crash(BaseException):
    """A worker killed at a crash point (SIGKILL in the fault harness): nothing after it runs."""


_armed: list[str] = []


def _crash_when_armed(name: str) -> None:
    if name in _armed:
        _armed.clear()
        raise Crash(name)


faults.add_observer(_crash_when_armed)

# What a run of a step may meet without anything being wrong: another run's live attempt or lock,
# a batch aborted or committed meanwhile, a moved cursor (the compare-and-set), its own crash.
EXPECTED = (PipelineBusyError, BatchStateError, CursorMovedError, Crash)
histories = Counter[str]()


class ExactlyOnce(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.ledger = MemoryLedger(clock=self.clock)
        self.kafka = MemoryKafka()
        self.kafka.create_topic("t", PARTITIONS)
        self.sink = MemorySink()
        self.spark = MemorySpark(self.kafka, self.sink)
        self.spec: PipelineSpec = build_spec("p", ["t"], "memory://out", max_records_per_batch=3)
        self.actors = [Actor(hostname=f"worker-{w}", pid=w) for w in (0, 1)]
        self.plans: list[BatchPlan | None] = [None, None]  # what each worker last planned or loaded
        self.seen: dict[int, BatchPlan] = {}  # every plan as first seen (I2)
        self.committed_at: dict[int, object] = {}
        histories["histories"] += 1

    @initialize()
    def first_records(self) -> None:
        self.produce(0, 2, marker=False)

    # the world
    @rule(partition=st.integers(0, PARTITIONS - 1), n=st.integers(1, 4), marker=st.booleans())
    def produce(self, partition: int, n: int, marker: bool) -> None:
        """New records, and with ``marker`` a transaction's commit marker after them (a gap in the offsets)."""
        self.kafka.produce("t", partition, *(uuid.uuid4().bytes for _ in range(n)))
        if marker:
            self.kafka.commit_marker("t", partition)

    @rule(seconds=st.sampled_from([1.0, LEASE_S / 2, LEASE_S + 1]))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # a worker's steps
    def _run(
        self, step: str, crash_at: str | None, call: Callable[[], T], also: tuple[type[BaseException], ...] = ()
    ) -> T | None:
        histories[step] += 1
        if crash_at:
            _armed[:] = [crash_at]
        try:
            return call()
        except (*EXPECTED, *also) as exc:
            histories[f"{step}: {type(exc).__name__}"] += 1
            return None
        finally:
            _armed.clear()

    @rule(w=WORKERS, crash=st.sampled_from([None, "after_plan"]))
    def plan(self, w: int, crash: str | None) -> None:
        outcome = self._run(
            "plan", crash, lambda: plan_batch(self.ledger, self.spec, self.kafka, self.sink, self.actors[w])
        )
        if outcome is not None and outcome.plan is not None:
            plan = outcome.plan
            assert self.seen.setdefault(plan.batch_id, plan) == plan, "a planned batch was planned again differently"
            self.plans[w] = plan

    @rule(w=WORKERS, crash=st.sampled_from([None, "after_spark", "while_spark_runs"]))
    def read(self, w: int, crash: str | None) -> None:
        plan = self.plans[w] or self.plans[1 - w]
        if plan is None:
            return
        if crash == "while_spark_runs":
            self.die_while_spark_runs(w, plan)
            return
        self._run(
            "read",
            crash,
            lambda: run_batch(self.ledger, self.sink, plan, self.spark, {}, self.actors[w], lease_s=LEASE_S, wait_s=0),
        )

    def die_while_spark_runs(self, w: int, plan: BatchPlan) -> None:
        """A worker starts an attempt and is killed before Spark ends: only its lease running out frees the batch."""

        def start() -> None:
            with self.ledger.transaction() as tx:
                if tx.batch(plan.pipeline, plan.batch_id, for_update=True).state is BatchState.PLANNED and not any(
                    a.live for a in tx.attempts(plan.pipeline, [plan.batch_id], reports=False)
                ):
                    start_attempt_in(tx, self.sink, plan, self.actors[w], LEASE_S)

        self._run("die while Spark runs", None, start)

    @rule(w=WORKERS, crash=st.sampled_from([None, "after_publish", "in_commit_transaction", "after_commit"]))
    def commit(self, w: int, crash: str | None) -> None:
        plan = self.plans[w] or self.plans[1 - w]
        if plan is None:
            return
        self._run("commit", crash, lambda: commit_batch(self.ledger, self.sink, "p", plan.batch_id, self.actors[w]))

    @rule(w=WORKERS)
    def replay(self, w: int) -> None:
        """A retry of the whole task: read and commit its plan again, whatever became of it."""
        plan = self.plans[w] or self.plans[1 - w]
        if plan is None:
            return
        self._run(
            "replay read",
            None,
            lambda: run_batch(self.ledger, self.sink, plan, self.spark, {}, self.actors[w], wait_s=0),
        )
        self._run(
            "replay commit", None, lambda: commit_batch(self.ledger, self.sink, "p", plan.batch_id, self.actors[w])
        )

    @rule(w=WORKERS)
    def run_to_end(self, w: int) -> None:
        """A run with nothing in its way: plan (or find the planned batch), read and commit it."""
        self.plan(w, None)
        self.replay(w)

    # operations
    @rule()
    def abort(self) -> None:
        """The abort operation: give up the planned batch and withdraw anything of it readers could see."""

        def abort() -> None:
            with self.ledger.transaction() as tx:
                tx.lock_existing_pipeline("p")
                planned = tx.planned_batch_id("p")
                if planned is None:
                    return
                plan = tx.batch("p", planned).plan
                tx.abort_batch("p", planned, "model", self.actors[0])
                withdrawn = self.sink.withdraw(tx, tx.pipeline_uid("p"), plan)
            if withdrawn:
                self.sink.discard_attempt(withdrawn)
            discard_ended_attempts(self.ledger, self.sink, "p", planned)

        if self.seen:
            self._run("abort", None, abort)

    @rule(partition=st.integers(0, PARTITIONS - 1), delta=st.sampled_from([-3, -1, 2]), rogue=st.booleans())
    def reset(self, partition: int, delta: int, rogue: bool) -> None:
        """Move one cursor by ``delta`` (a skip or a rewind). The reset operation refuses while a batch is
        planned; a rogue one does not, and then only the commit's compare-and-set keeps I3."""

        def reset() -> None:
            with self.ledger.transaction() as tx:
                tx.lock_existing_pipeline("p")
                if tx.planned_batch_id("p") is not None and not rogue:
                    return
                before = tx.cursors("p").get(TopicPartition("t", partition))
                if before is None:
                    return
                end = self.kafka(["t"])[TopicPartition("t", partition)].latest
                after = min(max(before + delta, 0), end)
                tx.apply_reset(
                    "p", [PartitionReset("t", partition, before, after)], {"mode": "shift-by"}, self.actors[0]
                )

        if self.seen:  # a rogue skip over a planned batch's live range is refused as the overlap it is (I1)
            self._run("reset", None, reset, also=(psycopg2.errors.ExclusionViolation,))

    # invariants
    @invariant()
    def exactly_once(self) -> None:
        with self.ledger.transaction(read_only=True) as tx:
            planned = tx.planned_batch_id("p")
            if not self.seen and planned is None:
                return
            cursors = tx.cursors("p")
            problems = tx.contiguity_problems("p")
            committed = tx.committed_batch_ids("p")
            records = {b: tx.batch("p", b) for b in range(1, max([*self.seen, *committed, planned or 0]) + 1)}
        assert problems == [], problems  # I1
        assert sum(r.state is BatchState.PLANNED for r in records.values()) <= 1
        for batch_id, record in records.items():
            first = self.seen.setdefault(batch_id, record.plan)
            assert record.plan == first, f"batch {batch_id} changed after it was planned (I2)"
            if record.state is BatchState.COMMITTED:
                assert self.committed_at.setdefault(batch_id, record.committed_at) == record.committed_at  # I3
        audit = self.ledger.audit_entries("p")
        events = Counter(e.batch_id for e in audit if e.event == "committed")
        assert all(n == 1 for n in events.values()), f"a batch was committed twice: {events}"  # I3
        assert set(events) <= set(committed)
        # I3: a cursor is where the batch committed last (in commit order, not batch order: a rogue rewind and
        # skip back to a planned batch's start let that batch commit after them) covering its partition left
        # it, or where the first plan covering it started it
        at: dict[TopicPartition, int] = {}
        for b in sorted(self.seen, reverse=True):
            at.update({r.topic_partition: r.cursor for r in self.seen[b].ranges})
        commit_order = list(dict.fromkeys(e.batch_id for e in audit if e.event in ("committed", "reset")))
        assert sorted(commit_order) == committed, f"committed {committed}, audited {commit_order}"
        for b in commit_order:
            at.update({r.topic_partition: r.end for r in records[b].plan.ranges})
        assert cursors == {tp: at[tp] for tp in cursors}, f"cursors {cursors}, committed batches say {at}"
        self._check_output(committed, records)

    def _check_output(self, committed: list[int], records: dict[int, BatchRecord]) -> None:
        """I4 and exactly once: each committed batch's output holds exactly its ranges' records, at the location
        of (pipeline, batch); within an epoch no offset is output twice, and every produced offset up to the
        cursor is output once unless a recorded skip covers it."""
        out: dict[tuple[int, TopicPartition], Counter[int]] = {}
        skipped: dict[tuple[int, TopicPartition], set[int]] = {}
        reached: dict[tuple[int, TopicPartition], tuple[int, int]] = {}
        for b in committed:
            plan = records[b].plan
            is_reset = plan.output_uri == ""
            if not is_reset:
                assert plan.output_uri == self.sink.output_uri("p", b)
                got = self.sink.committed_records([plan.output_uri])
                want = [
                    ("t", r.partition, o, v)
                    for r in plan.ranges
                    for o, v in self.kafka.records(r.topic_partition, r.start, r.end)
                ]
                assert sorted(got) == sorted(want), f"batch {b}: output differs from its ranges' records (I4)"
            for r in plan.ranges:
                key = (plan.epoch, r.topic_partition)
                first, _ = reached.get(key, (r.cursor, r.cursor))
                reached[key] = (first, r.end)
                if is_reset or r.lost:
                    skipped.setdefault(key, set()).update(range(r.cursor, r.start if not is_reset else r.end))
                if not is_reset:
                    out.setdefault(key, Counter()).update(
                        o for o, _ in self.kafka.records(r.topic_partition, r.start, r.end)
                    )
        for key, (first, end) in reached.items():
            seen = out.get(key, Counter())
            assert all(n == 1 for n in seen.values()), f"{key}: an offset is in the output twice in one epoch"
            produced = {o for o, _ in self.kafka.records(key[1], first, end)}
            missing = produced - set(seen) - skipped.get(key, set())
            assert not missing, f"{key}: offsets {sorted(missing)} neither output nor recorded as skipped"


def test_exactly_once_holds_in_every_history(capsys: pytest.CaptureFixture[str]) -> None:
    histories.clear()
    started = time.monotonic()
    test = ExactlyOnce.TestCase
    test.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    test("runTest").runTest()
    took = time.monotonic() - started
    with capsys.disabled():
        steps = {k: v for k, v in sorted(histories.items()) if k != "histories"}
        print(
            f"\nexactly-once model: {histories['histories']} histories of up to {STEPS} steps in {took:.1f}s; {steps}"
        )
    assert histories["histories"] >= EXAMPLES


def test_a_batch_committed_after_a_rogue_rewind_and_a_skip_back_to_its_start_leaves_the_cursor_at_its_end():
    """Found by the model: a planned batch, a rogue rewind and a skip back to the batch's start, then the
    batch's replay commits (the cursor equals its start again, so the compare-and-set holds) after the two
    reset batches: the cursor is that batch's end, every offset once per epoch."""
    state = ExactlyOnce()
    state.first_records()
    state.run_to_end(w=0)
    state.produce(marker=False, n=1, partition=0)
    state.plan(crash=None, w=0)
    state.reset(delta=-3, partition=0, rogue=True)
    state.reset(delta=2, partition=0, rogue=True)
    state.replay(w=0)
    state.exactly_once()
    state.teardown()
