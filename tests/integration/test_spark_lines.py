"""Batches on the Spark lines users run (3.5, 4.0 besides the worker's 4.2), from one worker install.

Each line's Spark is a pyspark of that version installed into its own Spark home
(``devstack.spark_lines``), put first on PATH as a cluster's client would be; the worker's venv
(pyspark 4.2) is unchanged. The package finds the Spark that runs the batch from the spark-submit
on PATH and gives it the connector built for it; the checks read the output with readers that
know nothing of the ledger (pyarrow, PyIceberg, delta-rs) and every produced id must be there
once. A connector or Connect client that does not fit the cluster's Spark is refused before
anything is planned, with the coordinates or pins to use.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import SparkVersionMismatchError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.batches import commit_batch, run_batch
from airflow_kafka_offsets.spark.runner import batch_runner
from airflow_kafka_offsets.spark.settings import SparkSettings
from devstack import jars, spark_lines
from faults_harness import lake_readers

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce, refused
from .pipeline import ACTOR, plan, sink_of

# The lines the test command runs (the worker's own 4.2 runs in every other test); the whole
# matrix (4.1 too, Connect servers of each line) is scripts/spark-matrix.
LINES = ["3.5", "4.0"]
JSON_SCHEMA = "id STRING, n INT"


@pytest.fixture(scope="module", params=LINES)
def line_home(request: pytest.FixtureRequest, stack) -> tuple[str, Path, list[str]]:
    """(version, Spark home, connector jars) of one line, installed once per machine."""
    version = spark_lines.resolve(request.param)
    home = spark_lines.spark_home(version)
    return version, home, [str(j) for j in jars.fetch_connector(version)]


@pytest.fixture()
def on_path(line_home, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, list[str]]:
    """The line's spark-submit first on PATH, as on a worker that is the cluster's client."""
    version, home, _ = line_home
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return line_home


def run_line_batch(stack, ledger: Ledger, spec, settings: SparkSettings):
    outcome = plan(ledger, spec, stack)
    assert outcome.plan is not None
    runner = batch_runner(settings)
    report = run_batch(
        ledger,
        sink_of(ledger, spec),
        outcome.plan,
        runner,
        {"bootstrap.servers": stack.bootstrap_servers},
        ACTOR,
    )
    commit_batch(ledger, sink_of(ledger, spec), spec.name, outcome.plan.batch_id, ACTOR)
    return outcome.plan, report


@pytest.mark.integration
@pytest.mark.parametrize("sink_format", ["directory", "iceberg", "delta"])
def test_a_batch_runs_on_the_clusters_spark_line_in_every_sink(
    stack, ledger, make_topic, tmp_path, on_path, sink_format
):
    version, _, connector = on_path
    topic = make_topic(partitions=2)
    name = f"line_{version.replace('.', '_')}_{sink_format}"
    table = f"lake.{name}" if sink_format == "iceberg" else name
    sink = None if sink_format == "directory" else {"format": sink_format, "table": table}
    spec = build_spec(name, [topic], str(tmp_path / "out"), json_schema=JSON_SCHEMA, sink=sink)
    produced = produce(stack.bootstrap_servers, topic, 200, 2)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    producer.produce(topic, key=b"not-utf8", value=b'{"id": "\xff\xfe"}', partition=0)
    assert producer.flush(30) == 0

    batch, report = run_line_batch(stack, ledger, spec, SparkSettings(jars=tuple(connector)))

    assert report.spark_version == version  # the batch ran on the line's Spark, not the worker's 4.2
    ranges = [(b, state, t, p, start, end) for b, state, t, p, _, start, end, _ in ledger_ranges(ledger, name)]
    assert ranges == [(batch.batch_id, "committed", topic, 0, 0, 101), (batch.batch_id, "committed", topic, 1, 0, 100)]
    if sink_format == "directory":
        rows = committed_rows(ledger, name)
    else:
        rows = lake_readers.read_table(stack.pg_url(), ledger.schema, spec).to_pylist()
    bad = [r for r in rows if r["key"] == b"not-utf8"]
    assert [(r["offset"], r["decode_error"], r["decoded"]) for r in bad] == [(100, "value is not valid UTF-8", None)]
    rows = [r for r in rows if r["key"] != b"not-utf8"]
    assert_exactly_once(rows, produced)
    # the JSON decode step ran on this line too (is_valid_utf8 is Spark 4's; 3.5 checks otherwise)
    assert all(r["decode_error"] is None and r["decoded"] == json.loads(r["value"]) for r in rows)


@pytest.mark.integration
def test_a_connector_built_for_another_spark_is_refused_before_anything_is_planned(
    stack, ledger, make_topic, tmp_path, on_path
):
    version, _, _ = on_path
    worker_connector = [str(j) for j in jars.fetch_connector(spark_lines.resolve("4.2"))]
    scala = "2.12" if version.startswith("3.") else "2.13"
    runner = batch_runner(SparkSettings(jars=tuple(worker_connector)))
    with refused(
        SparkVersionMismatchError,
        rf"connector is version 4\.2\.0 for Scala 2\.13 but the Spark that runs the batch is {version} "
        rf"\(Scala {scala}\): use org\.apache\.spark:spark-sql-kafka-0-10_{scala}:{version} \(Spark home ",
    ):
        runner.check()
    # without jars or packages, the default is the connector built for the line
    assert batch_runner(SparkSettings()).check().packages == (
        f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{version}",
    )
