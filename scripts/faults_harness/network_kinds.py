"""The network fault kinds (``scripts/faults --network``): a worker's link to one service, through the
stack's toxiproxy (:mod:`faults_harness.links`), black-holed, cut, reset or slowed at a chosen moment of
its try, then healed before the next try. Each also checks the try ended within a bound: a try still
running then is killed and the trial fails saying it hung."""

from __future__ import annotations

from collections.abc import Callable

from devstack.toxiproxy_api import Toxic, both_ways
from faults_harness.bounded import Bounded, at_pause, bound_checked, during_read, faulted, held_for, links_of
from faults_harness.context import TrialError
from faults_harness.fault import Fault
from faults_harness.links import Links
from faults_harness.pipeline import Pipeline
from faults_harness.procs import Worker
from faults_harness.service_links import SERVICE_KINDS
from faults_harness.worker import PAUSE_ENV

LEDGER_IDLE_MS = 2000
"""The black-holed commit's ledger connection: its ``idle_in_transaction_session_timeout`` (connection extra)."""
LEDGER_BOUND_S = LEDGER_IDLE_MS / 1000 + 20
"""A commit whose ledger went silent must have failed by then: the server ends the idle transaction, and
its close reaches the worker through the proxy (20 s for a loaded machine)."""
READ_BOUND_S = 150.0
"""A read whose Kafka or Spark Connect link was cut and healed must have ended by then."""
LEASE_S = 3
"""The slowed read's attempt lease (``[kafka_offsets] attempt_lease_seconds``)."""
LEDGER_LATENCY_MS = 500
"""Latency each way on the slowed ledger link: a renewal's round trips (a new connection, its SETs, the
UPDATE) take longer than the lease, a connection still opens within libpq's 10 s connect timeout."""
LEASE_ENV = "AIRFLOW__KAFKA_OFFSETS__ATTEMPT_LEASE_SECONDS"
CONNECT_RESETS = {"brief": (0.5, 2.0), "outlasting": (10.0, 12.0)}
"""Seconds the Spark Connect link stays reset: within the client's retries, or past them (the package's
policy retries 4 times with backoffs of at most 4 s: about 4.3 s, plus jitter)."""
KAFKA_SILENT_BOUND_S = 400.0
"""A read whose Kafka link went silent must have failed by then (the Kafka consumer's poll timeout in Spark,
``spark.network.timeout``'s 120 s by default, on a loaded machine)."""
CONNECT_SILENT_BOUND_S = 200.0
"""A read whose Connect link went silent must have failed by then: the keepalive ping's 20 + 10 s, then the
client's retries, each waiting up to gRPC's 20 s for a connection that cannot be set up (a loaded machine)."""
CONNECT_LOST = ("the Spark Connect server at", "did not answer")
"""What a read says when the Connect server did not answer (``spark.connect.connect_job_error``)."""


def ledger_blackhole(pipe: Pipeline) -> Fault:
    """The commit's ledger link black-holed both ways with its transaction open after publishing (toxiproxy's
    ``timeout`` toxic: nothing passes, nothing is closed), healed once the try ended. The server ends the
    idle transaction (the connection's ``idle_in_transaction_session_timeout``), its close reaches the
    worker, the try fails; the next try commits the batch once."""
    links = links_of(pipe)
    bounded = Bounded(LEDGER_BOUND_S, "the ledger link went silent")
    env = {
        PAUSE_ENV: "after_publish",
        "AIRFLOW_CONN_POSTGRES_DEFAULT": links.ledger_connection(idle_in_transaction_session_timeout=LEDGER_IDLE_MS),
    }

    monitor = at_pause(
        links,
        "after_publish",
        bounded,
        lambda: links.add("postgres", both_ways("blackhole", "timeout", timeout=0)),
        lambda: (
            "ledger link black-holed with the commit transaction open after publishing, "
            f"healed {bounded.took:.1f}s later"
        ),
    )
    fault = Fault("commit", env, monitor=monitor, description="ledger link black-holed inside the commit")

    def check() -> None:
        worker = faulted(pipe, env)
        fault.outcome += "; " + bounded.check(worker)
        if worker.ok:
            raise TrialError(f"a commit whose ledger went silent should fail, it returned {worker.result}")

    fault.after = check
    return fault


def kafka_cut(pipe: Pipeline) -> Fault:
    """The Kafka link cut during the Spark read (the proxy disabled: connections closed, new ones refused),
    healed a few seconds later: the attempt fails or finishes; the batch is read once."""
    hold = pipe.rng.uniform(1.0, 3.0)

    def inject(links: Links) -> str:
        return held_for(links, hold, lambda: links.client.set_enabled("kafka", False), "Kafka link cut")

    fault, bounded = during_read(pipe, "Kafka link cut during the Spark read", inject, READ_BOUND_S)
    return bound_checked(pipe, fault, bounded)


def silenced_during_read(
    pipe: Pipeline, proxy: str, what: str, bound_s: float, judge: Callable[[Worker], str | None]
) -> Fault:
    """``proxy``'s link black-holed both ways once the Spark attempt runs (toxiproxy's ``timeout`` toxic:
    nothing passes, nothing is closed, TCP stays up) until the try ended; the try is bound-checked, then
    ``judged``."""

    def inject(links: Links) -> str:
        links.add(proxy, both_ways("blackhole", "timeout", timeout=0))
        return f"{what} link black-holed until the try ended"

    fault, bounded = during_read(pipe, f"{what} link black-holed mid-read", inject, bound_s)
    return bound_checked(pipe, fault, bounded, judge)


def kafka_blackhole(pipe: Pipeline) -> Fault:
    """The Kafka link silenced during the Spark read until the try ended: the Kafka clients' own timeouts must
    end the read with an error, never a hang; the next try reads the batch once."""

    def judge(worker: Worker) -> str | None:
        return "a read whose Kafka link stayed silent should fail" if worker.ok else None

    return silenced_during_read(pipe, "kafka", "Kafka", KAFKA_SILENT_BOUND_S, judge)


def connect_reset(pipe: Pipeline) -> Fault:
    """The Spark Connect link reset mid-batch (toxiproxy's ``reset_peer``: every connection closed with a
    TCP RST, new ones too), healed after a while: briefly (the client's retries carry the try through, or
    it fails), or for longer than the client's retries last (the package's policy: a few seconds), when
    the try must fail saying the Connect server did not answer. Either way the batch is read once."""
    variant = pipe.rng.choice(list(CONNECT_RESETS))
    hold = pipe.rng.uniform(*CONNECT_RESETS[variant])

    def inject(links: Links) -> str:
        reset = [Toxic("reset", "reset_peer", "downstream", {"timeout": 0})]
        return held_for(links, hold, lambda: links.add("spark_connect", reset), f"Spark Connect link reset ({variant})")

    fault, bounded = during_read(pipe, f"Spark Connect link reset mid-batch ({variant})", inject, READ_BOUND_S)
    return bound_checked(pipe, fault, bounded, None if variant == "brief" else connect_lost)


def connect_blackhole(pipe: Pipeline) -> Fault:
    """The Spark Connect link silenced mid-batch until the try ended: only the channel's keepalive pings can
    tell the server is gone. The try must fail saying the Connect server did not answer, within its bound
    (never hang); the next try reads the batch once."""
    return silenced_during_read(pipe, "spark_connect", "Spark Connect", CONNECT_SILENT_BOUND_S, connect_lost)


def connect_lost(worker: Worker) -> str | None:
    """A try whose Connect link stayed reset past the client's retries must fail naming the server."""
    if worker.ok or not all(words in str(worker.error) for words in CONNECT_LOST):
        return f"a read whose Spark Connect link outlasted the client's retries should fail saying so: {worker.error}"
    return None


def slow_ledger(pipe: Pipeline) -> Fault:
    """The ledger link slowed (toxiproxy's ``latency`` both ways) during the Spark job past the attempt's
    lease: the try must fail saying it lost its lease (never 'wrote no report'); the next try reads and
    commits the batch once."""
    env = {LEASE_ENV: str(LEASE_S)}

    def inject(links: Links) -> str:
        links.add("postgres", both_ways("slow_ledger", "latency", latency=LEDGER_LATENCY_MS))
        return f"ledger link slowed by {LEDGER_LATENCY_MS} ms each way (lease {LEASE_S}s)"

    fault, bounded = during_read(pipe, "ledger link slowed past the attempt lease", inject, READ_BOUND_S, env)

    def judge(worker: Worker) -> str | None:
        if worker.ok or "lost its lease" not in str(worker.error):
            return (
                f"a read whose ledger link outlasted its lease should fail saying so: {worker.result or worker.error}"
            )
        return None

    return bound_checked(pipe, fault, bounded, judge)


NETWORK_KINDS: dict[str, Callable[[Pipeline], Fault]] = {
    "ledger_blackhole": ledger_blackhole,
    "kafka_cut": kafka_cut,
    "kafka_blackhole": kafka_blackhole,
    "connect_reset": connect_reset,
    "connect_blackhole": connect_blackhole,
    "slow_ledger": slow_ledger,
    **SERVICE_KINDS,  # s3_blackhole (--storage s3), registry_cut (--avro)
}
