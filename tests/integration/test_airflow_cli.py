"""``airflow kafka-offsets ...`` (Airflow's own CLI, real subprocess) on the real stack: the same
output as the ``airflow-kafka-offsets`` console script and the same ledger rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec

from .helpers import ledger_ranges, produce
from .pipeline import run_once

BIN = Path(sys.executable).parent

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


def airflow_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "airflow"), "kafka-offsets", *args], capture_output=True, text=True, timeout=300)


def console(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "airflow-kafka-offsets"), *args], capture_output=True, text=True, timeout=300)


def same_stdout(*args: str) -> str:
    """Run both shells; both must succeed and print exactly the same stdout, which is returned."""
    ours, theirs = airflow_cli(*args), console(*args)
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.stdout == theirs.stdout
    return ours.stdout


def reset_rows(ledger, pipeline: str) -> list[tuple]:
    with ledger.transaction() as tx:
        return tx.fetchall(
            "SELECT b.batch_id, b.kind, b.epoch, r.partition, r.cursor_offset, r.start_offset, r.end_offset,"
            " r.previous_offset FROM {s}.batch_ranges r JOIN {s}.batches b USING (pipeline, batch_id)"
            " WHERE r.pipeline = %s AND b.kind = 'reset' ORDER BY b.batch_id, r.partition",
            (pipeline,),
        )


def audit_events(ledger, pipeline: str) -> list[tuple]:
    with ledger.transaction() as tx:
        return tx.fetchall(
            "SELECT batch_id, event, actor->>'cli' FROM {s}.audit WHERE pipeline = %s AND event = 'reset' ORDER BY id",
            (pipeline,),
        )


def test_airflow_kafka_offsets_status_and_reset_on_the_real_stack(stack, ledger, schema, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produce(stack.bootstrap_servers, topic, 10, partitions=2)
    run_once(ledger, build_spec("afcli", [topic], str(tmp_path)), stack)
    common = ("afcli", "--ledger-schema", schema)

    status = json.loads(same_stdout("status", *common, "--json"))
    assert [
        (p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"], p["lag_records"])
        for p in status["partitions"]
    ] == [(topic, 0, 5, 5, 0), (topic, 1, 5, 5, 0)]
    assert [(b["batch_id"], b["state"], b["records_committed"]) for b in status["batches"]] == [(1, "committed", 10)]
    assert status["in_flight"] is None
    text = same_stdout("status", *common)
    assert f"{topic}-0" in text and f"{topic}-1" in text

    before = ledger_ranges(ledger, "afcli")
    dry = same_stdout("reset", *common, "--to-offset", "2", "--partitions", "0")
    assert dry.splitlines()[0] == (
        "reset afcli to-offset: dry run, nothing changed (turn dry run off, or add --execute, to apply)"
    )
    assert [line.split() for line in dry.splitlines()[1:]][-1] == [f"{topic}-0", "5", "2", "rewind", "3"]
    assert ledger_ranges(ledger, "afcli") == before and reset_rows(ledger, "afcli") == []

    done = airflow_cli("reset", *common, "--to-offset", "2", "--partitions", "0", "--execute", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "applied": True,
        "dry_run": False,
        "batch_id": 2,
        "changes": [{"topic": topic, "partition": 0, "before": 5, "after": 2, "change": "rewind 3"}],
    }
    assert ledger.cursors("afcli") == {TP(topic, 0): 2, TP(topic, 1): 5}
    # A rewind opens epoch 1; its reset batch marks where each partition starts in it.
    assert reset_rows(ledger, "afcli") == [(2, "reset", 1, 0, 2, 2, 2, 5), (2, "reset", 1, 1, 5, 5, 5, 5)]
    assert audit_events(ledger, "afcli") == [(2, "reset", "reset")]

    after = ledger_ranges(ledger, "afcli")
    bad = airflow_cli("reset", *common, "--to-offset", "99", "--execute")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "airflow kafka-offsets reset: " in bad.stderr and "out of range" in bad.stderr
    none = airflow_cli("reset", *common, "--execute")
    assert none.returncode == 2
    assert (
        "airflow kafka-offsets reset: give exactly one reset mode: --to-earliest, --to-latest, --to-datetime VALUE,"
        " --to-offset VALUE, --shift-by VALUE; got none"
    ) in none.stderr
    assert ledger_ranges(ledger, "afcli") == after and ledger.cursors("afcli") == {TP(topic, 0): 2, TP(topic, 1): 5}
