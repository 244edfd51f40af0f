"""A ledger that stops answering costs the stated seconds, never a hang: the worker fails with a clear
error within its connection's deadlines, the server ends the dead worker's transaction and releases the
pipeline's locks on its own, the next run commits the batch exactly once, and a Spark attempt whose
lease could not be kept says so and never commits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psycopg2
import pytest

from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import BatchState, PartitionOffsets
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import AttemptLeaseLostError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.attempts import start_attempt
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.lease import EXIT_WAIT_S, LeaseKeeper
from airflow_kafka_offsets.service.plan import plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink
from benchmarks.scaling import fake_submit

from .network import Forwarder, SilentLink, silent_link

# Serial: it bounds in seconds how long a silent ledger costs, which a loaded machine would stretch.
pytestmark = [pytest.mark.integration, pytest.mark.serial]
T = TypeVar("T")

ACTOR = Actor.from_json({"test": True})
OFFSETS = {TP("t", 0): PartitionOffsets(0, 40), TP("t", 1): PartitionOffsets(0, 25)}
# Small deadlines, set the documented way (the connection's extra), so the test takes seconds.
EXTRA = {
    "connect_timeout": 3,
    "keepalives_idle": 1,
    "keepalives_interval": 1,
    "keepalives_count": 2,
    "tcp_user_timeout": 2000,
    "idle_in_transaction_session_timeout": 10_000,
}
WORKER = """
import sys, time
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.hooks.ledger import LedgerHook
from airflow_kafka_offsets.service import faults
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.sinks import LocalDirectorySink

schema, root, pipeline, batch_id = sys.argv[1:5]
ledger = LedgerHook("ledger_silent", schema=schema).get_conn()
started = []

def pause(point):
    if point == "in_commit_transaction":  # cursor advanced, batch marked committed, COMMIT not sent
        print("paused", flush=True)
        sys.stdin.readline()  # the link is cut now
        started.append(time.monotonic())

faults.add_observer(pause)
try:
    commit_batch(ledger, LocalDirectorySink(root), pipeline, int(batch_id), Actor.from_json({"worker": "silent"}))
    print("committed", flush=True)
except Exception as exc:
    print(f"failed after {time.monotonic() - started[0]:.2f}s", type(exc).__name__, exc, flush=True)
"""


def planned_and_read(ledger: Ledger, root: Path) -> tuple[LocalDirectorySink, int]:
    spec = build_spec("silent", ["t"], str(root))
    sink = LocalDirectorySink(str(root))
    plan = plan_batch(ledger, spec, lambda topics: OFFSETS, sink, ACTOR).plan
    run_batch(ledger, sink, plan, fake_submit, {}, ACTOR)
    return sink, plan.batch_id


def stack_ledger_connection() -> dict:
    """The stack's ledger connection as the ``stack`` fixture gives it to Airflow."""
    return dict(json.loads(os.environ["AIRFLOW_CONN_POSTGRES_DEFAULT"]))


def batch_lock_held(stack, schema: str, batch_id: int) -> bool:
    """Whether another session holds the batch row's lock (asked without waiting for it)."""
    conn = psycopg2.connect(stack.pg_dsn())
    try:
        conn.cursor().execute(
            f'SELECT 1 FROM "{schema}".batches WHERE pipeline = %s AND batch_id = %s FOR UPDATE NOWAIT',
            ("silent", batch_id),
        )
        return False
    except psycopg2.errors.LockNotAvailable:
        return True
    finally:
        conn.close()


def commit_in_namespace(
    link: SilentLink, schema: str, root: Path, batch_id: int, cut: Callable[[], None], then: Callable[[], T]
) -> tuple[str, float, T]:
    """The commit of ``batch_id`` by a worker in ``link``'s namespace, paused with its transaction open, ``cut``
    then resumed: what it printed, its seconds from the cut, and ``then()`` as soon as it printed."""
    return commit_through(link.forwarder, link.command, EXTRA, schema, root, batch_id, cut, then)


def commit_through(
    forwarder: Forwarder,
    command: Callable[..., list[str]],
    extra: dict,
    schema: str,
    root: Path,
    batch_id: int,
    cut: Callable[[], None],
    then: Callable[[], T],
) -> tuple[str, float, T]:
    """The commit of ``batch_id`` by a worker started by ``command`` whose ledger is reached through
    ``forwarder`` with ``extra``, paused with its transaction open, ``cut`` then resumed."""
    host, port = forwarder.address
    connection = {**stack_ledger_connection(), "host": host, "port": port, "extra": extra}
    env = {**os.environ, "AIRFLOW_CONN_LEDGER_SILENT": json.dumps(connection)}
    worker = subprocess.Popen(
        command(sys.executable, "-c", WORKER, schema, str(root), "silent", str(batch_id)),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdin is not None
        assert worker.stdout.readline().strip() == "paused", worker.stderr.read() if worker.stderr else ""
        cut()
        started = time.monotonic()
        worker.stdin.write("go\n")
        worker.stdin.flush()
        outcome = worker.stdout.readline().strip()
        waited = time.monotonic() - started
        observed = then()
        worker.wait(60)  # its exit, on a loaded machine
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    return outcome, waited, observed


def test_a_commit_whose_ledger_goes_silent_fails_in_seconds_and_the_next_run_commits_once(
    stack, ledger: Ledger, schema: str, tmp_path: Path
) -> None:
    sink, batch_id = planned_and_read(ledger, tmp_path)
    with silent_link((stack.pg_host, stack.pg_port)) as link:
        outcome, waited, held_by_the_dead_worker = commit_in_namespace(
            link, schema, tmp_path, batch_id, link.drop, lambda: batch_lock_held(stack, schema, batch_id)
        )
        print(f"silent ledger: worker failed {waited:.2f}s after the link was cut: {outcome}")
        # The COMMIT went unacknowledged: TCP_USER_TIMEOUT (2 s) ends it, not the OS's retransmission minutes.
        assert outcome.startswith("failed after "), outcome
        assert "LedgerConnectionLostError lost the connection to the ledger database while committing" in outcome
        assert "the next run reads the outcome from the ledger" in outcome
        assert waited < 15, outcome  # 2 s of TCP_USER_TIMEOUT and a loaded machine's latency
        assert held_by_the_dead_worker  # its transaction outlived its connection ...
        # ... and the server ends the dead worker's transaction (idle for 10 s), releasing the batch and cursor
        # locks on its own: another run then commits the batch, exactly once.
        locked = time.monotonic()
        outcome_now = commit_batch(ledger, sink, "silent", batch_id, ACTOR)
        print(f"silent ledger: the next run committed {time.monotonic() - locked:.2f}s later")
        assert time.monotonic() - locked < 12
        assert outcome_now.committed_now
    committed = ledger.batch("silent", batch_id)
    assert committed.state is BatchState.COMMITTED and committed.committed_by == ACTOR  # not the dead worker
    assert [b.plan.batch_id for b in ledger.committed_batches("silent")] == [batch_id]
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT batch_id, state FROM {s}.batches WHERE pipeline = %s", ("silent",)) == [
            (batch_id, "committed")
        ]
    assert ledger.cursors("silent") == {tp: o.latest for tp, o in OFFSETS.items()}
    assert ledger.contiguity_problems("silent") == []


def the_next_try_finds_it_committed_by_the_silent_worker(
    ledger: Ledger, sink: LocalDirectorySink, batch_id: int
) -> None:
    """The silent worker's COMMIT made it: the next try commits nothing twice, the ledger's rows exact."""
    silent_worker = Actor.from_json({"worker": "silent"})
    assert ledger.batch("silent", batch_id).committed_by == silent_worker  # its COMMIT made it
    again = commit_batch(ledger, sink, "silent", batch_id, ACTOR)  # the next try
    assert not again.committed_now
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT batch_id, state FROM {s}.batches WHERE pipeline = %s", ("silent",)) == [
            (batch_id, "committed")
        ]
    assert ledger.batch("silent", batch_id).committed_by == silent_worker  # not committed twice
    assert ledger.cursors("silent") == {tp: o.latest for tp, o in OFFSETS.items()}
    assert ledger.contiguity_problems("silent") == []


def answers_dropped(link: SilentLink) -> None:
    link.drop_answers()


def answer_held_then_silent(link: SilentLink) -> None:
    """The COMMIT reaches the server and is acknowledged; its answer is held, and half a second later (before
    the first keepalive probe) every packet is dropped: only keepalives can notice."""
    link.forwarder.hold_answers()
    threading.Timer(0.5, link.drop).start()


@pytest.mark.parametrize("cut", [answers_dropped, answer_held_then_silent], ids=["unacknowledged", "unanswered"])
def test_a_commit_whose_answer_never_comes_back_fails_in_seconds_and_the_next_try_finds_it_committed(
    stack, ledger: Ledger, schema: str, tmp_path: Path, cut: Callable[[SilentLink], None]
) -> None:
    """The COMMIT reaches PostgreSQL and commits; its answer never comes back, the link silent. The worker gives
    up after tcp_user_timeout (2 s here, 30 s by default, as the guarantees page states): on its unacknowledged
    COMMIT, or on its unanswered keepalive probes (Linux ends those at the user timeout too), not after the
    OS's retransmission minutes or hours; the next try reads the outcome from the ledger and commits nothing
    twice."""
    sink, batch_id = planned_and_read(ledger, tmp_path)
    with silent_link((stack.pg_host, stack.pg_port)) as link:
        outcome, waited, _ = commit_in_namespace(link, schema, tmp_path, batch_id, lambda: cut(link), lambda: None)
    print(f"answer lost: worker failed {waited:.2f}s after sending its COMMIT: {outcome}")
    assert outcome.startswith("failed after "), outcome
    assert "LedgerConnectionLostError lost the connection to the ledger database while committing" in outcome
    assert "Connection timed out" in outcome and "this worker gave up after tcp_user_timeout 2000 ms of" in outcome
    assert EXTRA["tcp_user_timeout"] / 1000 - 0.5 < waited < 12, outcome
    the_next_try_finds_it_committed_by_the_silent_worker(ledger, sink, batch_id)


def test_a_commit_whose_answer_a_proxy_holds_fails_after_answer_timeout_and_the_next_try_finds_it_committed(
    stack, ledger: Ledger, schema: str, tmp_path: Path
) -> None:
    """A proxy between the worker and PostgreSQL keeps acknowledging TCP, but the COMMIT's answer never comes
    back: the worker's kernel sees every byte acknowledged and every keepalive answered, so no TCP deadline
    fires (without ``answer_timeout`` the worker waits forever). ``answer_timeout`` (2 s here, 30 s by default)
    shuts the connection; the COMMIT made it, and the next try finds the batch committed once."""
    sink, batch_id = planned_and_read(ledger, tmp_path)
    proxy = Forwarder("127.0.0.1", (stack.pg_host, stack.pg_port))
    try:
        extra = {**EXTRA, "answer_timeout": 2000}
        outcome, waited, _ = commit_through(
            proxy, lambda *argv: list(argv), extra, schema, tmp_path, batch_id, proxy.hold_answers, lambda: None
        )
    finally:
        proxy.close()
    print(f"answer held by a proxy: worker failed {waited:.2f}s after sending its COMMIT: {outcome}")
    assert outcome.startswith("failed after "), outcome
    assert "LedgerConnectionLostError lost the connection to the ledger database while committing" in outcome
    assert "(AnswerDeadlineExpired: the worker shut the connection after 2 s without an answer, ledger at " in outcome
    assert "No answer came within answer_timeout 2000 ms (keys of the ledger connection's extra)" in outcome
    assert 1.9 < waited < 12, outcome
    the_next_try_finds_it_committed_by_the_silent_worker(ledger, sink, batch_id)


def test_leaving_a_lease_keeper_does_not_wait_for_a_renewal_stuck_on_a_silent_ledger(
    stack, ledger: Ledger, schema: str, tmp_path: Path
) -> None:
    spec = build_spec("stuck", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    plan = plan_batch(ledger, spec, lambda topics: OFFSETS, sink, ACTOR).plan
    with ledger.transaction() as tx:
        attempt_id, _ = start_attempt(tx, sink, plan, ACTOR, 1.2)
    forwarder = Forwarder("127.0.0.1", (stack.pg_host, stack.pg_port))
    host, port = forwarder.address
    through = Ledger(lambda: psycopg2.connect(stack.pg_dsn(), host=host, port=port), schema=schema, lock_timeout_s=5)
    try:
        keeper = LeaseKeeper(through, attempt_id, 1.2)
        with keeper:
            time.sleep(0.5)  # renewals every 0.3 s get through
            forwarder.freeze()  # the next renewal's statement is never answered
            time.sleep(1.5)
            left = time.monotonic()
        assert time.monotonic() - left < EXIT_WAIT_S + 0.5
        loss = keeper.lost
        assert loss is not None and loss.why == "no renewal reached the ledger within its 1.2s lease"
    finally:
        forwarder.close()
    with ledger.transaction() as tx:
        (attempt,) = tx.attempts("stuck", [plan.batch_id], reports=False)
    assert attempt.state == "running" and not attempt.live  # its lease ran out; nothing revived it


def test_an_attempt_whose_lease_was_taken_while_spark_ran_says_so_and_the_next_run_commits_once(
    stack, ledger: Ledger, tmp_path: Path
) -> None:
    spec = build_spec("taken", ["t"], str(tmp_path))
    sink = LocalDirectorySink(str(tmp_path))
    plan = plan_batch(ledger, spec, lambda topics: OFFSETS, sink, ACTOR).plan
    stalled: list[str] = []

    def stalled_spark(job: dict) -> None:
        """A stall past the lease: another run declares the attempt dead and removes its staging."""
        stalled.append(job["attempt_id"])
        with ledger.transaction() as tx:
            tx.execute("UPDATE {s}.attempts SET lease_expires_at = now() WHERE attempt_id = %s", (job["attempt_id"],))
            assert tx.mark_dead_attempts("taken", plan.batch_id) == [job["attempt_id"]]

    with pytest.raises(AttemptLeaseLostError) as caught:
        run_batch(ledger, sink, plan, stalled_spark, {}, ACTOR)
    message = str(caught.value)
    assert message.startswith(f"attempt {stalled[0]} of batch {plan.batch_id} of pipeline 'taken' lost its lease at ")
    assert message.endswith(
        "Another run may have taken the batch; nothing was committed by this attempt and its output is "
        f"discarded; the next run replays batch {plan.batch_id}"
    )
    assert "wrote no report" not in message
    assert ledger.batch("taken", plan.batch_id).state is BatchState.PLANNED
    assert ledger.cursors("taken") == dict.fromkeys(OFFSETS, 0)  # where the plan started it
    run_batch(ledger, sink, plan, fake_submit, {}, ACTOR)
    assert commit_batch(ledger, sink, "taken", plan.batch_id, ACTOR).committed_now
    assert ledger.cursors("taken") == {tp: o.latest for tp, o in OFFSETS.items()}
    assert [b.plan.batch_id for b in ledger.committed_batches("taken")] == [plan.batch_id]
    with ledger.transaction() as tx:
        states = tx.fetchall(
            "SELECT attempt_id, state FROM {s}.attempts WHERE pipeline = %s ORDER BY started_at", ("taken",)
        )
    assert states[0] == (stalled[0], "dead") and [s for _, s in states[1:]] == ["succeeded"]


@pytest.mark.parametrize("hook_extra", [{}, {"sqlalchemy_scheme": "postgresql+psycopg2"}], ids=["psycopg2", "hook"])
def test_every_ledger_connection_and_the_catalogs_carry_the_deadlines_with_the_extras_values(
    stack, schema: str, monkeypatch: pytest.MonkeyPatch, hook_extra: dict
) -> None:
    """Opened by psycopg2 directly or by PostgresHook (an extra only the hook knows), and the Iceberg
    catalog's SQLAlchemy engine: the defaults, with the extra's value where it gives one."""
    import sqlalchemy

    from airflow_kafka_offsets.hooks.ledger import LedgerHook

    extra = {**hook_extra, "tcp_user_timeout": 7000, "statement_timeout": 123_000, "keepalives_idle": 4}
    connection = {**stack_ledger_connection(), "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_LEDGER_DEADLINES", json.dumps(connection))
    names = ("statement_timeout", "idle_in_transaction_session_timeout", "tcp_user_timeout", "tcp_keepalives_idle")
    expected = {"statement_timeout": "123s", "idle_in_transaction_session_timeout": "5min"}
    expected |= {"tcp_user_timeout": "7000", "tcp_keepalives_idle": "4"}
    ledger = LedgerHook("ledger_deadlines", schema=schema).get_conn(migrate=False)
    with ledger.transaction() as tx:
        assert {name: tx.fetchone(f"SHOW {name}")[0] for name in names} == expected
        assert tx.fetchone("SHOW lock_timeout")[0] == "1min"
    engine = sqlalchemy.create_engine(ledger.catalog_uri or "")
    try:
        with engine.connect() as conn:
            assert {name: conn.exec_driver_sql(f"SHOW {name}").scalar() for name in names} == expected
    finally:
        engine.dispose()
