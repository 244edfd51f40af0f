"""The fault kinds: each makes the faults for the batch of a trial that gets one (and may run more
itself: successors, late commits). A fault names the task it hits; in the one-task form a kind's
faults all hit the ``batch`` task, in the order their steps run in it."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from airflow_kafka_offsets.service.faults import CRASH_ENV
from faults_harness.commit_hold import MOMENTS, S3_COMMIT, CommitHolder
from faults_harness.context import MISSED, S3_COMMIT_SINKS, TrialError
from faults_harness.driver import check_replayed, run_dag
from faults_harness.fault import Fault, in_one_task
from faults_harness.lake_readers import REST_CONN_ENV
from faults_harness.lost_ack import CommitAckCutter
from faults_harness.monitors import (
    SPARK_START_TIMEOUT_S,
    kill_in_spark,
    restart,
    restart_at_pause,
    terminate_backends,
    wait_paused,
    wait_spark_app,
    wait_until,
)
from faults_harness.network_kinds import NETWORK_KINDS
from faults_harness.pipeline import WORKER_TIMEOUT_S, Pipeline
from faults_harness.procs import Worker
from faults_harness.worker import PAUSE_ENV


def crash(step: str, point: str) -> Callable[[Pipeline], Fault]:
    def make(pipe: Pipeline) -> Fault:
        return Fault(step, {CRASH_ENV: point}, description=f"SIGKILL at crash point {point}")

    return make


def spark_kill(target: str, whole_group: bool) -> Callable[[Pipeline], Fault]:
    def make(pipe: Pipeline) -> Fault:
        return Fault(
            "read",
            monitor=lambda p, w: kill_in_spark(p, w, target=target, whole_group=whole_group),
            description=f"SIGKILL during the Spark {target}",
        )

    return make


def postgres_restart(pipe: Pipeline) -> Fault:
    mode = pipe.rng.choice(["immediate", "fast"])
    if pipe.rng.random() < 0.5:

        def during_spark(p: Pipeline, w: Worker) -> str:
            if not wait_spark_app(w):
                return f"{MISSED}Spark never ran"
            time.sleep(p.rng.uniform(0.0, 3.0))
            phase = p.spark_phase(w)
            note = restart("postgres", mode=mode)
            return f"PostgreSQL restarted ({mode}) while the Spark job ran (phase {phase}){note}"

        return Fault("read", monitor=during_spark, description=f"PostgreSQL restart ({mode}) during Spark")
    point = pipe.rng.choice(["after_publish", "in_commit_transaction"])
    return Fault(
        "commit",
        {PAUSE_ENV: point},
        monitor=restart_at_pause(
            point, f"PostgreSQL restarted ({mode}) with the commit transaction open", "postgres", mode=mode
        ),
        description=f"PostgreSQL restart ({mode}) inside the commit at {point}",
    )


def kafka_restart(pipe: Pipeline) -> Fault:
    """The broker restarts while Spark starts up (metadata, offsets) or as its tasks fetch records."""
    hard = pipe.rng.random() < 0.5
    at_write = pipe.rng.random() < 0.5
    how = "SIGKILL" if hard else "clean"

    def during_spark(p: Pipeline, w: Worker) -> str:
        if not wait_spark_app(w):
            return f"{MISSED}Spark never ran"
        if at_write:  # tasks fetch from Kafka and write Parquet once _temporary exists
            wait_until(lambda: p.spark_phase(w) != "none", w, 180, poll=0.02)
        else:
            time.sleep(p.rng.uniform(0.0, 4.0))
        phase = p.spark_phase(w)
        if phase == "staged" or not w.alive():
            return f"{MISSED}the Spark job ended before the restart"
        note = restart("kafka", hard=hard)
        moment = "as its tasks fetched records" if phase == "writing" else "while it started"
        return f"Kafka broker restarted ({how}) during the Spark job, {moment}{note}"

    return Fault(
        "read",
        monitor=during_spark,
        description=f"Kafka restart ({how}) {'as Spark fetches' if at_write else 'as Spark starts'}",
    )


def s3_restart(pipe: Pipeline) -> list[Fault]:
    """The S3 server SIGKILLed and restarted on its data twice in one batch: while the Spark job
    runs (reading Kafka, writing its attempt), then with the commit stopped after the output was
    published (a manifest, a table commit) or inside the ledger's transaction."""
    point = pipe.rng.choice(["after_publish", "in_commit_transaction"])
    connect = pipe.ctx.on_spark_connect  # no process to watch, and a job of seconds
    delay = pipe.rng.uniform(0.1, 1.0) if connect else pipe.rng.uniform(0.5, 3.0)

    def during_spark(p: Pipeline, w: Worker) -> str:
        started = (lambda: p.attempt_running(w)) if connect else w.spark_app_running
        if not wait_until(started, w, SPARK_START_TIMEOUT_S, poll=0.2):
            return f"{MISSED}Spark never ran (worker ended {w.poll()})"
        time.sleep(delay)
        phase = p.spark_phase(w)
        if phase == "staged" or not w.alive():
            return f"{MISSED}the Spark job ended before the S3 server could be killed"
        note = restart("s3", hard=True)
        return f"S3 server SIGKILLed and restarted {delay:.1f}s into the Spark job (phase {phase}){note}"

    in_commit = restart_at_pause(point, "S3 server SIGKILLed and restarted with the commit stopped", "s3", hard=True)
    return [
        Fault("read", monitor=during_spark, description="S3 server SIGKILL + restart during Spark"),
        Fault("commit", {PAUSE_ENV: point}, monitor=in_commit, description=f"S3 server SIGKILL + restart at {point}"),
    ]


def stale_worker(pipe: Pipeline) -> Fault:
    """A worker presumed dead (paused) while a successor takes over, then it wakes up."""
    return stale_committer(pipe) if pipe.rng.random() < 0.5 else stale_reader()


def stale_committer(pipe: Pipeline) -> Fault:
    """A stops inside the commit transaction after publishing; its session is ended (the database's
    idle-in-transaction timeout, or an operator killing a zombie's session), the successor (the task's
    retry) commits; A wakes up and must not commit."""

    def commit_fenced(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}commit never reached after_publish"
        batch = p.planned_batch()
        ended = terminate_backends(p.ctx, w.env["PGAPPNAME"])
        successor = p.worker(w.step, "successor", 1, batch)  # the commit task's retry, or the batch task's
        p.finish(successor, "successor", 1)
        if successor.ok and successor.step == "batch" and batch is not None:
            check_replayed(p, batch, successor.answer())
        w.resume()
        return (
            f"committer paused after publishing, its session ended ({ended}); successor {successor.step} "
            f"{'ok ' + json.dumps(successor.result) if successor.ok else 'FAILED: ' + str(successor.error)}; "
            "the stale committer resumed"
        )

    fault = Fault(
        "commit",
        {PAUSE_ENV: "after_publish"},
        monitor=commit_fenced,
        description="stale committer resumes after a successor committed",
    )

    def check() -> None:
        stale = [w for w in pipe.workers if w.env.get(PAUSE_ENV) == "after_publish"][-1]
        if stale.ok:
            raise TrialError(f"the stale committer was not fenced: it returned {stale.result}")
        fault.outcome += f"; it failed: {stale.error}"

    fault.after = check
    return fault


def stale_reader() -> Fault:
    """A stops after its Spark attempt succeeded; the successor run reads again (or takes A's attempt)
    and commits; A wakes up and its run goes on to commit with its old attempt: in the three-task form
    a commit task of its own, in the one-task form the rest of A's task."""

    def reader_stale(p: Pipeline, w: Worker) -> str:
        if not wait_paused(w):
            return f"{MISSED}read never reached after_spark"
        batch = p.planned_batch()
        successor = run_dag(p, "successor")
        w.resume()
        w.wait(timeout=WORKER_TIMEOUT_S)
        late = w
        if w.step == "read":
            late = p.worker("commit", "stale", 1, batch)
            p.finish(late, "stale", 1)
        if not late.ok or late.answer().get("committed_now"):
            raise TrialError(
                f"the stale run's commit should report the batch already committed: {late.result or late.error}"
            )
        return (
            f"reader paused after Spark; successor run {'ok' if successor.ok else 'FAILED'} "
            f"(committed_now={successor.committed_now}); stale run resumed and its commit reported "
            "the batch already committed"
        )

    return Fault(
        "read",
        {PAUSE_ENV: "after_spark"},
        monitor=reader_stale,
        description="stale reader resumes after a successor committed",
    )


# The statement of the commit step's transaction that marks the batch committed (ledger/commits.py).
MARKS_COMMITTED = re.compile(rb"SET state = 'committed'")


def lost_commit_ack(pipe: Pipeline) -> Fault:
    """The ledger's COMMIT of the batch reaches PostgreSQL and its answer is lost: the try fails not
    knowing; the next one (the task's retry, or the next run) must find the batch committed and do
    nothing twice, the table (committed in that transaction, or before it) agreeing."""
    info = pipe.ctx.info
    cutter = CommitAckCutter((info.pg_host, info.pg_port), MARKS_COMMITTED)
    proxied = {
        "conn_type": "postgres",
        "host": "127.0.0.1",
        "port": cutter.port,
        "login": info.pg_user,
        "password": info.pg_password,
        "schema": info.pg_database,
    }
    proxied_env = json.dumps(proxied)

    def committed_unanswered(p: Pipeline, w: Worker) -> str:
        w.wait(timeout=WORKER_TIMEOUT_S)
        if not cutter.cut.is_set():
            return f"{MISSED}no COMMIT marking the batch committed went through the proxy (worker ended {w.poll()})"
        return "the ledger's COMMIT reached PostgreSQL, its answer was cut"

    fault = Fault(
        "commit",
        {"AIRFLOW_CONN_POSTGRES_DEFAULT": proxied_env},
        monitor=committed_unanswered,
        description="lost acknowledgment of the ledger's COMMIT",
    )

    def check() -> None:
        cutter.close()
        unanswered = [w for w in pipe.workers if w.env.get("AIRFLOW_CONN_POSTGRES_DEFAULT") == proxied_env]
        (worker,) = unanswered
        if cutter.cut.is_set() and (
            worker.ok or "lost the connection to the ledger database while committing" not in str(worker.error)
        ):
            raise TrialError(
                f"the try whose COMMIT went unanswered should fail saying so: {worker.result or worker.error}"
            )
        fault.outcome += f"; the try failed: {worker.error}"

    fault.after = check
    return fault


def catalog_restart(pipe: Pipeline) -> Fault:
    """The REST catalog SIGKILLed and restarted with the batch's table commit in flight: the request
    held before it reached the server, or the server's answer (it committed) held; the try fails not
    knowing which, and the next one must commit the batch once (faults_harness.commit_hold)."""
    moment = pipe.rng.choice(MOMENTS)
    connection = json.loads(os.environ[REST_CONN_ENV])
    upstream = urlsplit(connection["host"])
    assert upstream.hostname and upstream.port, f"{REST_CONN_ENV} names no host and port"
    holder = CommitHolder((upstream.hostname, upstream.port), moment)
    through_holder = json.dumps(connection | {"host": f"http://127.0.0.1:{holder.port}"})

    def restart_mid_commit(p: Pipeline, w: Worker) -> str:
        if not wait_until(holder.held.is_set, w, WORKER_TIMEOUT_S):
            return f"{MISSED}no table commit reached the catalog (worker ended {w.poll()})"
        note = restart("iceberg_rest", hard=True)
        what = "never reached the server" if moment == "request" else "was answered, the answer held"
        return f"REST catalog SIGKILLed and restarted while {holder.request_line.decode()} {what}{note}"

    fault = Fault(
        "commit",
        {REST_CONN_ENV: through_holder},
        monitor=restart_mid_commit,
        description=f"REST catalog SIGKILL + restart with the table commit's {moment} in flight",
    )

    def check() -> None:
        holder.close()
        (worker,) = [w for w in pipe.workers if w.env.get(REST_CONN_ENV) == through_holder]
        if holder.held.is_set() and worker.ok:
            raise TrialError(f"the try whose table commit was cut should fail: it returned {worker.result}")
        fault.outcome += f"; the try failed: {worker.error}"

    fault.after = check
    return fault


S3_CONN_ENV = "AIRFLOW_CONN_KAFKA_OFFSETS_S3"


def s3_lost_answer(pipe: Pipeline) -> Fault:
    """The object store's PUT that commits the batch (a Delta log entry, a directory's manifest) reaches the
    S3 server, which stores it and answers; the answer never reaches the worker, whose connection is then
    reset. The client may ask again (a conditional PUT then finds the entry there) or the try fails; either
    way the next try must find the batch committed, never commit it twice (faults_harness.commit_hold)."""
    if pipe.ctx.storage != "s3" or pipe.ctx.sink not in S3_COMMIT_SINKS:
        raise TrialError(
            f"s3_lost_answer loses the answer of a commit PUT to S3: --storage s3 and --sink {S3_COMMIT_SINKS}"
        )
    connection = json.loads(pipe.ctx.env.get(S3_CONN_ENV) or os.environ[S3_CONN_ENV])
    upstream = urlsplit(connection["extra"]["endpoint_url"])
    assert upstream.hostname and upstream.port, f"{S3_CONN_ENV} names no endpoint host and port"
    holder = CommitHolder((upstream.hostname, upstream.port), "answer", S3_COMMIT)
    through_holder = json.dumps(
        connection | {"extra": connection["extra"] | {"endpoint_url": f"http://127.0.0.1:{holder.port}"}}
    )

    def answer_lost(p: Pipeline, w: Worker) -> str:
        if not wait_until(holder.held.is_set, w, WORKER_TIMEOUT_S):
            return f"{MISSED}no commit PUT reached the S3 server (worker ended {w.poll()})"
        holder.cut()
        return f"S3 stored {holder.request_line.decode()} and answered; the answer was lost, the connection reset"

    fault = Fault(
        "commit",
        {S3_CONN_ENV: through_holder},
        monitor=answer_lost,
        description="lost answer of the object store's commit PUT",
    )

    def check() -> None:
        holder.close()
        (worker,) = [w for w in pipe.workers if w.env.get(S3_CONN_ENV) == through_holder]
        fault.outcome += (
            f"; the try {'failed: ' + str(worker.error) if not worker.ok else 'finished: its client asked again'}"
        )

    fault.after = check
    return fault


KINDS: dict[str, Callable[[Pipeline], Fault | list[Fault]] | None] = {
    "after_plan": crash("plan", "after_plan"),
    "during_spark_read": spark_kill("read", whole_group=True),
    "during_parquet_write": spark_kill("write", whole_group=True),
    "spark_orphaned": spark_kill("write", whole_group=False),
    "after_spark": crash("read", "after_spark"),
    "after_publish": crash("commit", "after_publish"),
    "in_commit_transaction": crash("commit", "in_commit_transaction"),
    "after_commit": crash("commit", "after_commit"),
    "postgres_restart": postgres_restart,
    "kafka_restart": kafka_restart,
    "s3_restart": s3_restart,
    "stale_worker": stale_worker,
    "lost_commit_ack": lost_commit_ack,
    "catalog_restart": catalog_restart,
    "s3_lost_answer": s3_lost_answer,
    "concurrent_runs": None,  # two runs started together, no other fault
    **NETWORK_KINDS,  # --network only: the workers' links through toxiproxy
}

CHAINABLE = (
    "after_plan",
    "during_spark_read",
    "during_parquet_write",
    "after_spark",
    "after_publish",
    "in_commit_transaction",
    "after_commit",
)


def faults_of(kind: str, pipe: Pipeline) -> list[Fault]:
    """A kind's faults for one batch: most kinds have one; s3_restart hits the read and the commit
    (in the one-task form, both in the same try of the batch task)."""
    make = KINDS[kind]
    assert make is not None, "concurrent_runs has no fault of its own"
    made = make(pipe)
    faults = made if isinstance(made, list) else [made]
    return [in_one_task(faults)] if pipe.ctx.form == "one-task" else faults
