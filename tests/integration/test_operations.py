"""Manual operations on the real stack: status, replay, reset, catch-up, the trigger form and the CLI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KafkaTP

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.operation_fields import build_reset_request, parse_offset_ranges
from airflow_kafka_offsets.core.operations.replay import ReplaySelection
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import BatchStateError, InvalidPipelineSpecError
from airflow_kafka_offsets.service.consumer_group import mirror_to_consumer_group
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.catch_up import catch_up
from airflow_kafka_offsets.service.operations.replay import replay_batch, resolve_replay
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.service.operations.status import pipeline_status, render_status
from airflow_kafka_offsets.sinks import LocalDirectorySink

from . import pipeline
from .helpers import assert_exactly_once, committed_rows, ledger_ranges, local_path, produce
from .pipeline import operation_context, plan, run_once, submitter

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


def kafka_client(stack) -> KafkaOffsetsClient:
    return KafkaOffsetsClient({"bootstrap.servers": stack.bootstrap_servers})


def sorted_rows(path: Path) -> list[dict]:
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: (r["partition"], r["offset"]))


def test_status_reports_lag_in_records_and_time(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 20, partitions=2)
    spec = build_spec("st", [topic], str(tmp_path))
    run_once(ledger, spec, stack)
    produce(stack.bootstrap_servers, topic, 6, partitions=2)
    time.sleep(1.2)
    status = pipeline_status(operation_context(ledger, stack), "st")
    assert [
        (p["partition"], p["committed_offset"], p["log_end_offset"], p["lag_records"]) for p in status["partitions"]
    ] == [(0, 10, 13, 3), (1, 10, 13, 3)]
    assert all(p["lag_seconds"] >= 1.0 for p in status["partitions"])
    assert status["lag_records_total"] == 6 and status["in_flight"] is None
    assert [(b["batch_id"], b["state"], b["records_committed"]) for b in status["batches"]] == [(1, "committed", 20)]
    plan(ledger, spec, stack)
    in_flight = pipeline_status(operation_context(ledger, stack), "st")["in_flight"]
    assert in_flight["batch_id"] == 2 and in_flight["records_planned"] == 6
    assert "in flight: batch 2" in render_status(pipeline_status(operation_context(ledger, stack), "st"))


def test_replay_rebuilds_identical_output_in_place_and_elsewhere(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produced = produce(stack.bootstrap_servers, topic, 200, partitions=2)
    spec = build_spec("rp", [topic], str(tmp_path / "out"))
    outcome = run_once(ledger, spec, stack)
    original = sorted_rows(local_path(outcome.plan.output_uri))
    produce(stack.bootstrap_servers, topic, 50, partitions=2)  # new records must not leak into the replay
    cursors = ledger.cursors("rp")
    ids = resolve_replay(ledger, kafka_client(stack), "rp", ReplaySelection(first_batch=1, last_batch=1))
    assert ids == [1]
    ctx = operation_context(ledger, stack, submitter(stack))
    assert replay_batch(ctx, "rp", 1) == outcome.plan.output_uri
    assert sorted_rows(local_path(outcome.plan.output_uri)) == original
    other = replay_batch(ctx, "rp", 1, target_root=str(tmp_path / "copy"))
    assert other == f"file://{tmp_path}/copy/rp/batch=000000000001"
    assert sorted_rows(local_path(other)) == original
    assert ledger.cursors("rp") == cursors  # the cursor does not move
    assert [b.plan.batch_id for b in ledger.committed_batches("rp")] == [1]
    with ledger.transaction() as tx:
        events = [e for (e,) in tx.fetchall("SELECT event FROM {s}.audit WHERE event = 'replay'")]
    assert events == ["replay", "replay"]
    assert_exactly_once(committed_rows(ledger, "rp"), produced)


def test_replay_selection_by_offsets_and_time_and_bad_selections(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    spec = build_spec("sel", [topic], str(tmp_path))
    run_once(ledger, spec, stack)
    time.sleep(1.1)
    middle = datetime.now(UTC)
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    run_once(ledger, spec, stack)
    kafka = kafka_client(stack)
    by_offsets = ReplaySelection(offset_ranges=parse_offset_ranges(f"{topic}:0:9-11"))
    assert resolve_replay(ledger, kafka, "sel", by_offsets) == [1, 2]
    assert resolve_replay(ledger, kafka, "sel", ReplaySelection(since=middle)) == [2]
    with pytest.raises(InvalidPipelineSpecError, match="matches no committed batch"):
        resolve_replay(ledger, kafka, "sel", ReplaySelection(first_batch=7, last_batch=9))
    with pytest.raises(InvalidPipelineSpecError, match="empty batch range"):
        resolve_replay(ledger, kafka, "sel", ReplaySelection(first_batch=2, last_batch=1))
    with pytest.raises(InvalidPipelineSpecError, match="needs batch numbers"):
        resolve_replay(ledger, kafka, "sel", ReplaySelection())


def test_reset_to_earlier_datetime_rewinds_and_reingests_exactly_that_span(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    first = produce(stack.bootstrap_servers, topic, 40, partitions=2, tag="w1-")
    time.sleep(1.1)
    rewind_to = datetime.now(UTC)
    second = produce(stack.bootstrap_servers, topic, 30, partitions=2, tag="w2-")
    spec = build_spec("rw", [topic], str(tmp_path))
    run_once(ledger, spec, stack)
    ctx = operation_context(ledger, stack)
    request = build_reset_request("to-datetime", rewind_to.isoformat())
    dry = reset_offsets(ctx, "rw", request)  # dry run by default
    assert not dry.applied and ledger.cursors("rw") == {TP(topic, 0): 35, TP(topic, 1): 35}
    assert [(c["before"], c["after"], c["change"]) for c in dry.changes] == [(35, 20, "rewind 15")] * 2
    applied = reset_offsets(ctx, "rw", request, dry_run=False)
    assert applied.applied and applied.batch_id == 2
    assert ledger.cursors("rw") == {TP(topic, 0): 20, TP(topic, 1): 20}
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT r.epoch, b.kind, r.partition, r.previous_offset, r.cursor_offset, r.start_offset"
            " FROM {s}.batch_ranges r JOIN {s}.batches b USING (pipeline, batch_id)"
            " WHERE r.batch_id = 2 ORDER BY r.partition"
        )
    assert rows == [(1, "reset", 0, 35, 20, 20), (1, "reset", 1, 35, 20, 20)]
    again = run_once(ledger, spec, stack)
    assert [(r.start, r.end) for r in again.plan.ranges] == [(20, 35), (20, 35)]
    batch3 = local_path(again.plan.output_uri)
    assert_exactly_once(pq.read_table(batch3).to_pylist(), second)
    assert ledger.contiguity_problems("rw") == []
    assert len(first) == 40


def test_reset_forward_records_the_skip_and_reset_while_planned_is_refused(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    spec = build_spec("fw", [topic], str(tmp_path))
    run_once(ledger, spec, stack)
    produce(stack.bootstrap_servers, topic, 10, partitions=1)
    ctx = operation_context(ledger, stack)
    plan(ledger, spec, stack)
    with pytest.raises(BatchStateError, match="batch 2 planned"):
        reset_offsets(ctx, "fw", build_reset_request("to-latest"), dry_run=False)
    assert ledger.cursors("fw") == {TP(topic, 0): 10}
    assert abort_planned_batch(ctx, "fw", "test") == 2
    reset_offsets(ctx, "fw", build_reset_request("to-latest"), dry_run=False)
    assert ledger.cursors("fw") == {TP(topic, 0): 20}
    assert [(r[0], r[1], r[4], r[5], r[6]) for r in ledger_ranges(ledger, "fw")] == [
        (1, "committed", 0, 0, 10),
        (2, "aborted", 10, 10, 20),
        (3, "committed", 10, 20, 20),
    ]
    assert ledger.contiguity_problems("fw") == []


def test_catch_up_drains_a_backlog_in_capped_batches_and_mirrors_the_consumer_group(
    stack, ledger, make_topic, kafka_admin, tmp_path
):
    topic = make_topic(partitions=3)
    produced = produce(stack.bootstrap_servers, topic, 450, partitions=3)
    group = f"mirror-{topic}"
    spec = build_spec("cu", [topic], str(tmp_path), max_records_per_batch=200, consumer_group=group)
    ctx = operation_context(ledger, stack, submitter(stack))
    with ledger.transaction() as tx:
        tx.lock_pipeline(spec)
    outcome = catch_up(
        ctx, "cu", max_batches=10, after_commit=lambda: mirror_to_consumer_group(ledger, ctx.kafka, "cu")
    )
    assert (outcome.batches, outcome.records, outcome.lag_left) == (3, 450, 0)
    assert [b.records_committed for b in ledger.committed_batches("cu")] == [200, 200, 50]
    assert_exactly_once(committed_rows(ledger, "cu"), produced)
    request = ConsumerGroupTopicPartitions(group, [KafkaTP(topic, p) for p in range(3)])
    mirrored = kafka_admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    assert {(t.partition, t.offset) for t in mirrored.topic_partitions} == {(0, 150), (1, 150), (2, 150)}


def test_manual_ops_dag_trigger_form(stack, airflow_db, ledger, schema, make_topic, monkeypatch, tmp_path):
    from airflow_kafka_offsets.airflow_features import airflow_exception

    from ..dagbag import DagBag

    ParamValidationError = airflow_exception("ParamValidationError")

    dag = DagBag().get_dag("kafka_offsets_manual_ops")
    for bad in (
        {"operation": "explode"},
        {"pipeline": "../etc"},
        {"replay_since": "yesterday"},
        {"reset_partitions": "1;2"},
        {"catch_up_max_batches": 0},
        {"replay_offset_ranges": "t:0"},
        {"replay_offset_ranges": "garbage"},
        {"reset_value": "abc"},
    ):
        params = copy.deepcopy(dag.params)
        with pytest.raises(ParamValidationError):
            for key, value in bad.items():
                params[key] = value
            params.validate()

    params = copy.deepcopy(dag.params)
    params.validate()  # the defaults as they are
    for name in [n for n in params if n not in ("operation", "pipeline")]:
        params[name] = None  # what the form sends for a cleared field
    params.validate()

    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 12, partitions=1)
    run_once(ledger, build_spec("form", [topic], str(tmp_path)), stack)
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA", schema)
    run = dag.test(run_conf={"operation": "status", "pipeline": "form"})
    assert run.state == "success"
    # a dry run over every partition: blank topic and partitions mean all of them
    run = dag.test(
        run_conf={
            "operation": "reset",
            "pipeline": "form",
            "reset_mode": "to-earliest",
            "reset_topic": "",
            "reset_partitions": "  ",
        }
    )
    assert run.state == "success"
    assert ledger.cursors("form") == {TP(topic, 0): 12}
    run = dag.test(
        run_conf={
            "operation": "reset",
            "pipeline": "form",
            "reset_mode": "to-offset",
            "reset_value": "3",
            "dry_run": False,
        }
    )
    assert run.state == "success"
    assert ledger.cursors("form") == {TP(topic, 0): 3}
    # bad input in a valid form: a clear failure, nothing changed
    run = dag.test(
        run_conf={
            "operation": "reset",
            "pipeline": "form",
            "reset_mode": "to-offset",
            "reset_value": "999",
            "dry_run": False,
        }
    )
    assert run.state == "failed"
    run = dag.test(run_conf={"operation": "status", "pipeline": "no_such_pipeline"})
    assert run.state == "failed"
    assert ledger.cursors("form") == {TP(topic, 0): 3}


def test_cli_status_and_reset_json(stack, ledger, schema, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    produce(stack.bootstrap_servers, topic, 8, partitions=1)
    run_once(ledger, build_spec("cli", [topic], str(tmp_path)), stack)
    cli = [str(Path(sys.executable).parent / "airflow-kafka-offsets")]
    out = subprocess.run(
        [*cli, "status", "cli", "--ledger-schema", schema, "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["partitions"][0]["committed_offset"] == 8
    dry = subprocess.run(
        [*cli, "reset", "cli", "--ledger-schema", schema, "--to-earliest"], capture_output=True, text=True, timeout=120
    )
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stdout and "rewind 8" in dry.stdout
    bad = subprocess.run(
        [*cli, "reset", "cli", "--ledger-schema", schema, "--to-offset", "99", "--execute"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "out of range" in bad.stderr
    assert ledger.cursors("cli") == {TP(topic, 0): 8}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    cli = str(Path(sys.executable).parent / "airflow-kafka-offsets")
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=300)


def cli_json(*args: str) -> dict:
    """Run a subcommand with --json: it must succeed and stdout must be exactly one JSON document."""
    out = run_cli(*args, "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_cli_json_is_one_document_for_every_subcommand_and_matches_the_ledger(
    stack, ledger, schema, make_topic, tmp_path
):
    topic = make_topic(partitions=1)
    spec = build_spec("clij", [topic], str(tmp_path / "out"))
    produce(stack.bootstrap_servers, topic, 8, partitions=1)
    run_once(ledger, spec, stack)
    common = ("clij", "--ledger-schema", schema)

    status = cli_json("status", *common)
    assert [(p["partition"], p["committed_offset"], p["lag_records"]) for p in status["partitions"]] == [(0, 8, 0)]
    assert [b["batch_id"] for b in status["batches"]] == [1]

    reset = cli_json("reset", *common, "--to-offset", "4", "--execute")
    assert reset["applied"] is True and reset["dry_run"] is False
    assert reset["changes"] == [{"topic": topic, "partition": 0, "before": 8, "after": 4, "change": "rewind 4"}]
    assert ledger.cursors("clij") == {TP(topic, 0): 4}
    assert ledger.batch("clij", reset["batch_id"]).state.value == "committed"

    produce(stack.bootstrap_servers, topic, 4, partitions=1)
    on_connect = ("--spark-conn-id", pipeline.SPARK_CONN_ID)
    catch = cli_json("catch-up", *common, *on_connect, "--max-batches", "5")
    assert catch == {"batches": 1, "records": 8, "lag_left": 0}
    assert ledger.cursors("clij") == {TP(topic, 0): 12}

    replay = cli_json("replay", *common, *on_connect, "--batches", "1", "--output-root", str(tmp_path / "again"))
    assert replay == {"replayed": [1], "outputs": [f"file://{tmp_path / 'again'}/clij/batch=000000000001"]}
    assert ledger.cursors("clij") == {TP(topic, 0): 12}

    produce(stack.bootstrap_servers, topic, 2, partitions=1)
    planned = plan(ledger, spec, stack).plan.batch_id
    abort = cli_json("abort", *common, "--reason", "records deleted")
    assert abort == {"aborted": planned, "reason": "records deleted"}
    assert ledger.batch("clij", planned).state.value == "aborted"
    assert ledger.cursors("clij") == {TP(topic, 0): 12}

    # A staging directory no attempt in the ledger owns (a worker killed before it recorded its attempt).
    orphan = Path(
        LocalDirectorySink(str(tmp_path / "out")).staging_uri("clij", planned, "0" * 32).removeprefix("file://")
    )
    orphan.mkdir(parents=True)
    (orphan / "part-00000.parquet").write_bytes(b"partial")
    dry = cli_json("sweep", *common)
    assert dry["dry_run"] is True and [(i["kind"], i["batch_id"]) for i in dry["items"]] == [
        ("unknown_staging", planned)
    ]
    assert orphan.exists()
    done = cli_json("sweep", *common, "--execute")
    assert done["dry_run"] is False and [i["path"] for i in done["items"]] == [f"file://{orphan}"]
    assert not orphan.exists()
    assert ledger.cursors("clij") == {TP(topic, 0): 12}


def test_cli_table_mode_and_bad_options_name_the_option(stack, ledger, schema, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 6, partitions=2)
    run_once(ledger, build_spec("clit", [topic], str(tmp_path)), stack)
    common = ("clit", "--ledger-schema", schema)
    dry = run_cli("reset", *common, "--to-earliest", "--partitions", " ")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("rewind 3") == 2 and dry.stdout.count("partition") == 1  # one table, both partitions
    assert "dry run" in dry.stdout and "ResetRequest(" not in dry.stdout + dry.stderr
    bad = run_cli("replay", *common, "--batches", "two")
    assert bad.returncode == 2
    assert "--batches: expected FIRST or FIRST-LAST batch numbers, e.g. 3 or 3-5; got 'two'" in bad.stderr
    bad = run_cli("reset", *common, "--shift-by", "x")
    assert bad.returncode == 2 and "--shift-by: expected a whole number such as 42, got 'x'" in bad.stderr
    assert ledger.cursors("clit") == {TP(topic, 0): 3, TP(topic, 1): 3}
