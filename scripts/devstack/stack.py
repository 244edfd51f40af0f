"""The whole stack: bring it up idempotently, bring down exactly what was started, restart a part."""

from __future__ import annotations

import shutil
from typing import Any

from . import (
    airflow,
    cdc,
    ensure,
    iceberg_rest,
    info,
    jars,
    kafka,
    postgres,
    report,
    schema_registry,
    seaweedfs,
    spark_connect,
    state,
    toxiproxy,
)
from . import spark_cluster as spark
from .errors import StackError, say
from .info import StackInfo

# The Airflow components that exit when the metadata database restarts under them.
AIRFLOW_DB_BOUND = ("scheduler", "dag-processor", "triggerer")

STACK_VERSION = 1


def up(
    spark_cluster: bool = False,
    spark_connect_server: bool = False,
    spark_version: str | None = None,
    cdc_source: bool = False,
) -> StackInfo:
    """Start (or reuse) PostgreSQL + Kafka + the S3 server + the schema registry + the Iceberg REST catalog,
    a Spark cluster or Connect server if asked, and the CDC source (Kafka Connect with Debezium) with
    ``cdc_source``.

    ``spark_version`` (a release or a line, with ``spark_connect_server``): the Connect server of that
    Spark line instead of the default one (see :func:`start_spark_connect`). Servers recorded earlier
    are started again if they died.
    """
    line = ensure.line_version(spark_version)
    if line and not spark_connect_server:
        raise StackError("a Spark version applies to the Spark Connect server only: add --spark-connect")
    if not (spark_cluster or spark_connect_server or cdc_source):
        running = _running_as_recorded()
        if running is not None:
            return running
    with state.lock():
        sd = state.ensure_state_dir()
        stack = state.load() or {"version": STACK_VERSION, "state_dir": str(sd)}
        libs_dir, connector = jars.fetch_all()
        stack["cache_dir"] = str(state.cache_dir())
        stack["connector_jars"] = [str(p) for p in connector]
        stack["s3a_jars"] = [str(p) for p in jars.fetch_s3a()]
        stack["postgres"] = ensure.postgres_server(sd, stack.get("postgres"))
        state.save(stack)
        stack["kafka"] = ensure.kafka_broker(sd, stack.get("kafka"), libs_dir)
        state.save(stack)
        stack["s3"] = ensure.s3_server(sd, stack.get("s3"))
        state.save(stack)
        stack["schema_registry"] = ensure.schema_registry_server(sd, stack.get("schema_registry"))
        state.save(stack)
        stack["iceberg_rest"] = ensure.iceberg_rest_server(sd, stack)
        state.save(stack)
        if spark_cluster or stack.get("spark"):
            stack["spark"] = ensure.spark_cluster(sd, stack.get("spark"))
            state.save(stack)
        if (spark_connect_server and not line) or stack.get("spark_connect"):
            stack["spark_connect"] = ensure.connect_server(sd, stack)
            state.save(stack)
        for version in sorted({*stack.get("spark_connect_lines", {}), *([line] if line else [])}):
            ensure.connect_server_of_line(sd, stack, version)
            state.save(stack)
        if cdc_source or stack.get("cdc"):
            stack["cdc"] = cdc.ensure(sd, stack)
            state.save(stack)
        return info.from_stack(stack)


BASE_SERVICES = frozenset({"postgres", "kafka", "s3", "schema_registry", "iceberg_rest"})


def _running_as_recorded() -> StackInfo | None:
    """The stack as recorded, when it records every base service and each service it records runs and
    answers: nothing to start, so no lock to wait for (a process starting a service, such as a Connect
    server of another Spark line, holds it for a minute or more)."""
    stack = state.load()
    if not stack or "connector_jars" not in stack:
        return None
    found = report.status()
    if not found["up"] or not BASE_SERVICES <= found["services"].keys():
        return None
    return info.from_stack(stack)


def _stop_services(stack: dict[str, Any], keep_data: bool) -> None:
    """Every recorded service, the ones that use others first."""
    if stack.get("airflow"):
        say("stopping Airflow")
        airflow.stop(stack.pop("airflow"))
    if stack.get("toxiproxy"):
        say("stopping toxiproxy")
        toxiproxy.stop(stack.pop("toxiproxy"))
    if stack.get("cdc"):
        say("stopping Kafka Connect (Debezium)")
        cdc.stop(stack["cdc"])
    if stack.get("spark"):
        say("stopping Spark worker + master")
        spark.stop(stack["spark"])
    if stack.get("spark_connect"):
        say("stopping the Spark Connect server")
        spark_connect.stop(stack["spark_connect"])
    for version, cfg in stack.get("spark_connect_lines", {}).items():
        say(f"stopping the Spark {version} Connect server")
        spark_connect.stop(cfg)
    if stack.get("iceberg_rest"):
        say("stopping the Iceberg REST catalog")
        iceberg_rest.stop(stack["iceberg_rest"])
    if stack.get("schema_registry"):
        say("stopping the schema registry")
        schema_registry.stop(stack["schema_registry"])
    if stack.get("s3"):
        say("stopping the S3 server")
        # its data is deleted next unless kept: skip the filer's ~17 s graceful drain then
        seaweedfs.stop(stack["s3"], hard=not keep_data)
    if stack.get("kafka"):
        say("stopping Kafka")
        kafka.stop(stack["kafka"])
    if stack.get("postgres"):
        say("stopping PostgreSQL")
        postgres.stop(stack["postgres"])


def down(keep_data: bool = False) -> None:
    """Stop exactly what ``up`` started (by pid); remove the state dir unless ``keep_data``."""
    with state.lock():
        sd = state.state_dir()
        stack = state.load()
        if not stack:
            say(f"nothing recorded in {sd}; nothing to stop")
        _stop_services(stack, keep_data)
        if keep_data:
            stack.pop("spark", None)  # spark has no data worth keeping; `up` starts it anew
            stack.pop("spark_connect", None)
            stack.pop("spark_connect_lines", None)
            stack.pop("cdc", None)  # its replication slot and offsets go with the database: `up --cdc` anew
            if stack:
                state.save(stack)
            say(f"data kept in {sd}")
        elif sd.exists():
            shutil.rmtree(sd)
            say(f"removed {sd}")


def restart_kafka(hard: bool = False) -> None:
    """Stop and start the broker on the same ports and data (``hard``: SIGKILL, no clean shutdown)."""
    with state.lock():
        stack = state.require()
        kc = stack["kafka"]
        kafka.stop(kc, hard=hard)
        kc["pid"] = kafka.start(kc)
        state.save(stack)


def restart_postgres(mode: str = "fast") -> None:
    """Stop (``pg_ctl stop -m mode``: smart|fast|immediate) and start on the same port and data.

    A running Iceberg REST catalog is restarted after it: its JDBC pool keeps the connections the restart
    ended, and Iceberg's pool retries none that fail with PostgreSQL's admin-shutdown state (57P01). So are
    a running Airflow deployment's scheduler, dag-processor and triggerer, stopped before it: they exit
    when their metadata database shuts down under them (the api-server reconnects and keeps its port)."""
    with state.lock():
        stack = state.require()
        pg = stack["postgres"]
        deployment = stack.get("airflow")
        if deployment:
            airflow.stop(deployment, AIRFLOW_DB_BOUND)
        postgres.stop(pg, mode=mode)
        pg["pid"] = postgres.start(pg)
        catalog = stack.get("iceberg_rest")
        if catalog and iceberg_rest.is_running(catalog):
            iceberg_rest.stop(catalog)
            catalog["pid"] = iceberg_rest.start(catalog, pg, stack["s3"])
        try:
            if deployment:  # starts the components that are not running, waits until the DAGs are served
                airflow.start(deployment, pg, info.from_stack(stack).airflow_env())
        finally:
            state.save(stack)


def restart_s3(hard: bool = False) -> None:
    """Stop (``hard``: SIGKILL) and start the S3 server on the same ports, data and credentials."""
    restart("s3", seaweedfs, hard, "run `scripts/stack up` (it adds one)")


def restart_schema_registry(hard: bool = False) -> None:
    """Stop (``hard``: SIGKILL) and start the schema registry on the same ports, storage and password."""
    restart("schema_registry", schema_registry, hard, "run `scripts/stack up` (it adds one)")


def restart_iceberg_rest(hard: bool = False) -> None:
    """Stop (``hard``: SIGKILL) and start the Iceberg REST catalog on the same port, database and token."""
    with state.lock():
        stack = state.require()
        cfg = stack.get("iceberg_rest")
        if not cfg:
            raise StackError("this stack has no Iceberg REST catalog; run `scripts/stack up` (it adds one)")
        iceberg_rest.stop(cfg, hard=hard)
        cfg["pid"] = iceberg_rest.start(cfg, stack["postgres"], stack["s3"])
        state.save(stack)


def restart(name: str, service: Any, hard: bool, hint: str) -> None:
    """Stop (``hard``: SIGKILL) and start one recorded service with its recorded config."""
    with state.lock():
        stack = state.require()
        cfg = stack.get(name)
        if not cfg:
            raise StackError(f"this stack has no {name} service; {hint}")
        service.stop(cfg, hard=hard)
        cfg["pid"] = service.start(cfg)
        state.save(stack)


def current() -> StackInfo:
    """StackInfo of the running stack without starting anything."""
    return info.from_stack(state.require())
