"""Asset events and OpenLineage events of real DAG runs on the real stack.

``airflow dags test``: one run commits a batch, a second finds nothing new; Airflow's metadata DB
must hold exactly one asset event (through the pipeline's alias) whose extra names that batch,
and the OpenLineage file transport COMPLETE events naming the Kafka topic, the output and the
batch. A real scheduler: the commit's event triggers ``kafka_batch_consumer_example``, which
reads exactly that batch, and its partitioned event one run of ``kafka_batch_partition_example``
whose partition key names the batch. The real dag-processor: parsing alone puts each ingest DAG's topic in
Airflow's asset graph as ``kafka://<server>/<topic>``, consumed by the DAG's plan task.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg2

import devstack
from airflow_kafka_offsets.lineage import pipeline_output_alias
from devstack import procs

from .helpers import produce
from .test_manual_ops_ui import wait_until

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "kafka_ingest_example"
CONSUMER_DAG_ID = "kafka_batch_consumer_example"
CONSUMER_PIPELINE = "demo_events"  # the pipeline the consumer example is scheduled on
PARTITION_DAG_ID = "kafka_batch_partition_example"  # one run per batch, by partition key
LAG_DAG_ID, LAG_TOPIC = "kafka_lag_ingest_example", "lag-events"  # dags/kafka_lag_ingest_example.py


def airflow_dags_test(env: dict[str, str], logical_date: str) -> str:
    airflow = str(Path(sys.executable).parent / "airflow")
    result = subprocess.run(
        [airflow, "dags", "test", DAG_ID, logical_date],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    return output


def asset_events(output_uri: str) -> list[tuple[str, dict, list[str]]]:
    """(source task, extra, source aliases) of every event on the asset, from Airflow's metadata DB."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetModel.uri == output_uri)
            .order_by(AssetEvent.id)
        ).all()
        return [(e.source_task_id, e.extra, sorted(a.name for a in e.source_aliases)) for e in events]


def lineage_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def completes_of(events: list[dict], task: str) -> list[dict]:
    return [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == f"{DAG_ID}.ingest.{task}"]


def test_commit_emits_one_asset_event_and_openlineage_facets(stack, airflow_db, make_topic, schema, tmp_path):
    topic = make_topic(partitions=3)
    pipeline = f"assets_{schema}"
    output_root = tmp_path / "out"
    lineage_file = tmp_path / "openlineage.jsonl"
    env = {
        **os.environ,
        "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC": topic,
        "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE": pipeline,
        "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT": str(output_root),
        "AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA": schema,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(lineage_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "ako-test",
    }
    produce(stack.bootstrap_servers, topic, 90, partitions=3)
    first = airflow_dags_test(env, "2026-01-01T00:00:00+00:00")
    after_first = lineage_events(lineage_file)
    airflow_dags_test(env, "2026-01-01T00:05:00+00:00")  # nothing new in Kafka: nothing committed

    location = f"file://{output_root}/{pipeline}"
    server = stack.bootstrap_servers.split(",")[0]
    ranges = [{"topic": topic, "partition": p, "start": 0, "end": 30} for p in range(3)]
    batch = {
        "pipeline": pipeline,
        "batch_id": 1,
        "epoch": 0,
        "ranges": ranges,
        "records": 90,
        "output_uri": f"{location}/batch=000000000001",
        "output_location": location,
        "output_format": "directory",
        "output_table": None,
    }
    # one event, from the run that committed, through the pipeline's alias
    assert asset_events(location) == [("ingest.commit", batch, [pipeline_output_alias(pipeline).name])]

    # OpenLineage: the first run's read and commit name the topic, the output and the batch
    topic_dataset = {"namespace": f"kafka://{server}", "name": topic}
    output_dataset = {"namespace": "file", "name": f"{output_root}/{pipeline}"}
    facet = {
        "pipeline": pipeline,
        "batchId": 1,
        "epoch": 0,
        "ranges": ranges,
        "records": 90,
        "outputUri": f"{location}/batch=000000000001",
    }
    for task in ("read", "commit"):
        (complete,) = completes_of(after_first, task)
        assert [{k: d[k] for k in ("namespace", "name")} for d in complete["inputs"]] == [topic_dataset]
        assert [{k: d[k] for k in ("namespace", "name")} for d in complete["outputs"]] == [output_dataset]
        got = {k: v for k, v in complete["run"]["facets"]["kafkaOffsets"].items() if not k.startswith("_")}
        assert got == facet
    # Spark was told which Airflow task is its parent: the read task's own OpenLineage run id
    (read_complete,) = completes_of(after_first, "read")
    parent_run_ids = set(re.findall(r"spark\.openlineage\.parentRunId=([0-9a-f-]{36})", first))
    assert parent_run_ids == {read_complete["run"]["runId"]}

    # the second run read and committed nothing: no datasets, no batch facet
    second = lineage_events(lineage_file)[len(after_first) :]
    for task in ("read", "commit"):
        (complete,) = completes_of(second, task)
        assert (complete["inputs"], complete["outputs"]) == ([], [])
        assert "kafkaOffsets" not in complete["run"]["facets"]
    # the plan task's inlet, declared when the DAG was parsed, is its input in every run
    for events in (after_first, second):
        (complete,) = completes_of(events, "plan")
        assert [{k: d[k] for k in ("namespace", "name")} for d in complete["inputs"]] == [topic_dataset]


def api(airflow: dict, path: str, method: str = "GET", body: dict | None = None) -> Any:
    if "token" not in airflow:
        airflow["token"] = devstack.airflow.token(airflow)
    return devstack.airflow.api(airflow, path, airflow["token"], method=method, body=body)


@contextmanager
def airflow_variables(airflow: dict, variables: Mapping[str, str]) -> Iterator[None]:
    """The variables set for the block, then deleted, whatever happens in it or while setting them.

    A value left from an earlier run that ended without its clean-up is replaced, not a 409.
    """
    try:
        for key, value in variables.items():
            delete_variable(airflow, key)
            api(airflow, "variables", "POST", {"key": key, "value": value})
        yield
    finally:
        for key in variables:
            delete_variable(airflow, key)


def delete_variable(airflow: dict, key: str) -> None:
    try:
        api(airflow, f"variables/{key}", "DELETE")
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise


def runs_of(airflow: dict, dag_id: str) -> dict[str, dict]:
    return {r["dag_run_id"]: r for r in api(airflow, f"dags/{dag_id}/dagRuns?limit=100")["dag_runs"]}


def wait_until_finished(airflow: dict, dag_id: str, exclude: set[str], at_least: int, timeout: float = 300) -> dict:
    """The runs not in ``exclude`` once at least ``at_least`` exist and all have ended; all must succeed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = {k: r for k, r in runs_of(airflow, dag_id).items() if k not in exclude}
        if len(runs) >= at_least and all(r["state"] in ("success", "failed") for r in runs.values()):
            assert all(r["state"] == "success" for r in runs.values()), f"{runs}: see {airflow['home']}/logs"
            return runs
        time.sleep(2)
    raise AssertionError(f"fewer than {at_least} finished runs of {dag_id} within {timeout:.0f}s")


def test_commit_event_triggers_the_consumer_dag_which_reads_that_batch(airflow_ui, stack, make_topic, tmp_path):
    schema = airflow_ui["ledger_schema"]  # the deployment's ledger: start it afresh
    with psycopg2.connect(stack.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 40, partitions=2)
    variables = {
        "kafka_offsets_demo_topic": topic,
        "kafka_offsets_demo_pipeline": CONSUMER_PIPELINE,
        "kafka_offsets_demo_output": str(tmp_path / "out"),
    }
    with airflow_variables(airflow_ui, variables):
        consumer_before = set(runs_of(airflow_ui, CONSUMER_DAG_ID))
        partitioned_before = set(runs_of(airflow_ui, PARTITION_DAG_ID))
        ingest_before = set(runs_of(airflow_ui, DAG_ID))
        try:
            api(airflow_ui, f"dags/{CONSUMER_DAG_ID}", "PATCH", {"is_paused": False})
            api(airflow_ui, f"dags/{PARTITION_DAG_ID}", "PATCH", {"is_paused": False})
            api(airflow_ui, f"dags/{DAG_ID}", "PATCH", {"is_paused": False})
            api(airflow_ui, f"dags/{DAG_ID}/dagRuns", "POST", {"logical_date": None})  # commits batch 1
            ingest = wait_until_finished(airflow_ui, DAG_ID, ingest_before, 1)
            api(airflow_ui, f"dags/{DAG_ID}/dagRuns", "POST", {"logical_date": None})  # nothing new: no event
            ingest = wait_until_finished(airflow_ui, DAG_ID, ingest_before, len(ingest) + 1)
            runs = wait_until_finished(airflow_ui, CONSUMER_DAG_ID, consumer_before, 1)
            per_batch = wait_until_finished(airflow_ui, PARTITION_DAG_ID, partitioned_before, 1)
        finally:
            api(airflow_ui, f"dags/{PARTITION_DAG_ID}", "PATCH", {"is_paused": True})
            api(airflow_ui, f"dags/{DAG_ID}", "PATCH", {"is_paused": True})
            api(airflow_ui, f"dags/{CONSUMER_DAG_ID}", "PATCH", {"is_paused": True})
    # the ingest runs made one event between them: the ones triggered, and the one the scheduler may
    # have created when the DAG was parsed (so before `ingest_before`), which runs with this test's
    # variables too; events are this test's by the output location in their extra
    events = api(airflow_ui, f"assets/events?source_dag_id={DAG_ID}&limit=100")["asset_events"]
    ours = [
        e
        for e in events
        if str(tmp_path / "out") in e["extra"].get("output_uri", "") and not e["uri"].startswith("kafka-offsets://")
    ]
    assert [(e["source_task_id"], e["extra"]["batch_id"], e["extra"]["records"]) for e in ours] == [
        ("ingest.commit", 1, 40)
    ]
    (run,) = runs.values()  # so one consumer run
    assert run["run_type"] == "asset_triggered"
    xcom = api(
        airflow_ui,
        f"dags/{CONSUMER_DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/read_committed_batches"
        "/xcomEntries/return_value?deserialize=true",
    )
    assert xcom["value"] == [
        {
            "pipeline": CONSUMER_PIPELINE,
            "batch_id": 1,
            "records": 40,
            "partitions": {f"{topic}/0": [0, 19, 20], f"{topic}/1": [0, 19, 20]},
        }
    ]
    # the partitioned event: one run (the run that committed nothing emitted none), keyed by the batch
    (keyed,) = per_batch.values()
    assert (keyed["run_type"], keyed["partition_key"]) == ("asset_triggered", "batch=000000000001")
    keyed_xcom = api(
        airflow_ui,
        f"dags/{PARTITION_DAG_ID}/dagRuns/{keyed['dag_run_id']}/taskInstances/read_batch"
        "/xcomEntries/return_value?deserialize=true",
    )
    assert keyed_xcom["value"] == {
        "partition_key": "batch=000000000001",
        "batch_id": 1,
        "records": 40,
        "offsets": {f"{topic}/0": [0, 19], f"{topic}/1": [0, 19]},
    }
    keyed_events = api(airflow_ui, f"assets/events?source_dag_id={DAG_ID}&limit=100")["asset_events"]
    assert [
        (e["uri"], e["partition_key"], e["extra"]["batch_id"])
        for e in keyed_events
        if e["uri"] == f"kafka-offsets://{CONSUMER_PIPELINE}/batches"
        and str(tmp_path / "out") in e["extra"]["output_uri"]
    ] == [(f"kafka-offsets://{CONSUMER_PIPELINE}/batches", "batch=000000000001", 1)]


def request_parse(airflow: dict, dag_id: str, timeout: float = 120) -> None:
    """Ask the dag-processor to parse the DAG's file now.

    Airflow answers 409 while an earlier request for the file is still pending; that one may already
    be parsing with the old variables, so ask again until a request made from now on is accepted.
    """
    path = f"parseDagFile/{api(airflow, f'dags/{dag_id}/details')['file_token']}"

    def accepted() -> bool:
        try:
            api(airflow, path, "PUT")
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
            return False
        return True

    try:
        wait_until(accepted, f"the dag-processor to take a new parse request for {dag_id}", timeout)
    except AssertionError as exc:
        # the dag-processor claims requests once a second: say what it was doing instead
        health = api(airflow, "monitor/health").get("dag_processor")
        log = procs.tail(Path(airflow["home"]) / "logs" / "dag-processor.out", 30)
        raise AssertionError(f"{exc}; dag-processor health {health}, its log ends:\n{log}") from None


def consumers_of(airflow: dict, uri: str) -> list[tuple[str, str]]:
    """(dag, task) of each task that has the asset as an inlet in Airflow's asset graph."""
    assets = api(airflow, f"assets?uri_prefix_pattern={quote(uri, safe='')}&limit=100")["assets"]
    return sorted((t["dag_id"], t["task_id"]) for a in assets if a["uri"] == uri for t in a["consuming_tasks"])


def test_parsing_puts_each_ingest_dags_topic_in_the_asset_graph(airflow_ui, stack, make_topic):
    server = stack.bootstrap_servers.split(",")[0]
    topic = make_topic(partitions=1)  # new: no run has read it, only a parse can name it
    with airflow_variables(airflow_ui, {"kafka_offsets_demo_topic": topic}):
        request_parse(airflow_ui, DAG_ID)
        consumers = wait_until(
            lambda: consumers_of(airflow_ui, f"kafka://{server}/{topic}"), f"kafka://{server}/{topic} as an inlet", 90
        )
    assert consumers == [(DAG_ID, "ingest.plan")]
    # the lag example and the retention-warning example ingest the same pipeline and topic
    assert consumers_of(airflow_ui, f"kafka://{server}/{LAG_TOPIC}") == [
        (LAG_DAG_ID, "ingest.plan"),
        ("kafka_retention_warning_example", "ingest.plan"),
    ]
