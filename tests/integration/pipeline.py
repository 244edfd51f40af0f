"""Run plan -> Spark -> commit at the service level, as the operators do, on the real stack."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_kafka_offsets.clients.avro_registry import spark_registry_config
from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.clients.schema_registry import RegistryAccess
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.core.model import PipelineSpec
from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import s3a_spark_conf
from airflow_kafka_offsets.runtime import AIRFLOW_SINKS, object_storage, settings_runner
from airflow_kafka_offsets.service import faults
from airflow_kafka_offsets.service.commit import CommitOutcome, commit_batch
from airflow_kafka_offsets.service.context import OperationContext
from airflow_kafka_offsets.service.decoding import RegistryClients, next_decode
from airflow_kafka_offsets.service.plan import PlanOutcome, plan_batch
from airflow_kafka_offsets.service.read import run_batch
from airflow_kafka_offsets.sinks import Sink
from airflow_kafka_offsets.spark.runner import BatchRunner
from airflow_kafka_offsets.spark.settings import SparkSettings
from devstack.procs import cmdline
from faults_harness.procs import SPARK_APP_MARKER, SPARK_SUBMIT_MARKER

ACTOR = Actor(dag_id="tests", run_id="manual")
# The Spark connection of read() and run_once() when a test names none. A module whose subject is
# not spark-submit itself runs its batches on the session's warm Spark Connect server instead
# (pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")): seconds per batch, not a JVM each.
SPARK_CONN_ID = "spark_default"


def registry_clients(stack) -> RegistryClients:
    """The stack's schema registry for any connection id (Avro pipelines' reader schemas)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return lambda conn_id: SchemaRegistryClient({**stack.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S})


def registry_access(stack) -> dict:
    """How the Spark app reaches the stack's schema registry (the job's private part)."""
    access = RegistryAccess((stack.schema_registry_url,), stack.schema_registry_user, stack.schema_registry_password)
    return spark_registry_config(access)


def submitter(
    stack, conn_id: str | None = None, output_root: str | None = None, jars: tuple[str, ...] | None = None
) -> BatchRunner:
    """The stack's Spark (``SPARK_CONN_ID`` unless ``conn_id`` is given) with the Kafka connector (and
    S3A with its settings, for an s3:// output only: its 36 jars would be copied into every local
    batch's Spark for nothing); spark-submit, or Spark Connect for a spark_connect connection."""
    storage = object_storage(output_root) if output_root else None
    return settings_runner(
        SparkSettings(
            conn_id=conn_id or SPARK_CONN_ID,
            jars=(*(stack.connector_jars if jars is None else jars), *(stack.s3a_jars if storage else ())),
            private_conf=s3a_spark_conf(storage) if storage else {},
            storage=storage,
            registry_access=lambda conn_id: registry_access(stack),
        )
    )


def sink_of(ledger: Ledger, spec: PipelineSpec) -> Sink:
    return AIRFLOW_SINKS.for_spec(ledger, spec)


def operation_context(
    ledger: Ledger, stack, submit: BatchRunner | None = None, actor: Actor = ACTOR
) -> OperationContext:
    """What a manual operation works with, as the operator and the CLI give it: the stack's Kafka, the
    sinks through Airflow's connections, and with ``submit`` the Kafka settings for Spark."""
    kafka_properties = {"bootstrap.servers": stack.bootstrap_servers}
    kafka = KafkaOffsetsClient(kafka_properties)
    return OperationContext(
        ledger, kafka, actor, AIRFLOW_SINKS, submit, kafka_properties if submit else {}, registry_clients(stack)
    )


def plan(ledger: Ledger, spec: PipelineSpec, stack) -> PlanOutcome:
    kafka = KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})
    sink = sink_of(ledger, spec)
    decode = next_decode(ledger, spec, sink, registry_clients(stack))
    return plan_batch(ledger, spec, kafka.offsets, sink, ACTOR, decode)


def read(ledger: Ledger, spec: PipelineSpec, stack, outcome: PlanOutcome, conn_id: str | None = None):
    return run_batch(
        ledger,
        sink_of(ledger, spec),
        outcome.plan,
        submitter(stack, conn_id, spec.output_root),
        {"bootstrap.servers": stack.bootstrap_servers},
        ACTOR,
    )


def commit(ledger: Ledger, spec: PipelineSpec, batch_id: int) -> CommitOutcome:
    return commit_batch(ledger, sink_of(ledger, spec), spec.name, batch_id, ACTOR)


def run_once(ledger: Ledger, spec: PipelineSpec, stack, conn_id: str | None = None) -> CommitOutcome | None:
    outcome = plan(ledger, spec, stack)
    if outcome.plan is None:
        return None
    read(ledger, spec, stack, outcome, conn_id)
    return commit(ledger, spec, outcome.plan.batch_id)


def die_at(point: str) -> Callable[[str], None]:
    """A crash point observer that ends the worker there (its ledger transaction rolls back)."""

    def observer(name: str) -> None:
        if name == point:
            raise SystemExit(f"worker killed at {point}")

    return observer


def commit_dies_at(ledger: Ledger, spec: PipelineSpec, batch_id: int, point: str) -> None:
    """Run the commit step and let its worker die at ``point`` (its ledger transaction rolls back)."""
    faults._observers.append(die_at(point))
    try:
        with pytest.raises(SystemExit):
            commit(ledger, spec, batch_id)
    finally:
        faults._observers.pop()


def _descendants(root: int) -> list[int]:
    """Every live process under ``root`` (by /proc's parent ids)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def spark_processes() -> list[int]:
    """This process's spark-submit JVMs and their PySpark drivers."""
    markers = (SPARK_SUBMIT_MARKER, SPARK_APP_MARKER)
    return [pid for pid in _descendants(os.getpid()) if any(marker in cmdline(pid) for marker in markers)]


def read_killed_in_spark(ledger: Ledger, spec: PipelineSpec, stack, outcome: PlanOutcome) -> Exception:
    """The read through spark-submit, its JVM and PySpark driver SIGKILLed once the app runs its attempt
    (a dying executor host, an OOM killer): the error the read raised."""
    raised: list[Exception] = []

    def run() -> None:
        try:
            read(ledger, spec, stack, outcome, conn_id="spark_default")
        except Exception as exc:
            raised.append(exc)

    reader = threading.Thread(target=run, name="read-to-kill")
    reader.start()
    deadline = time.monotonic() + 240
    while not any(SPARK_APP_MARKER in cmdline(pid) for pid in spark_processes()):
        assert reader.is_alive() and time.monotonic() < deadline, f"the Spark app never ran: {raised}"
        time.sleep(0.05)
    time.sleep(1.0)  # its read under way
    for pid in spark_processes():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    reader.join(120)
    assert not reader.is_alive() and raised, "the read outlived its Spark"
    return raised[0]
