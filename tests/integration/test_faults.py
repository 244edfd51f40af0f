"""The fault-injection harness (scripts/faults) on the real stack.

The test command runs PostgreSQL restarted (the lost answer of the ledger's COMMIT on every sink family is
test_network_faults_sinks.py's); the others are long tests
(``AKO_LONG_TESTS=1 scripts/test tests/integration/test_faults.py``), each beside the faster test that proves the
same in CI, named where it is marked.

A trial produces records with unique ids, runs plan -> read -> commit as separate worker
processes, injects its fault, recovers like Airflow (task retry or next run) and verifies
exactly-once through the ledger (see scripts/faults_harness/README.md). The
seven crash and kill points run as one chained trial: each hits the next try of the same
batch (plan crash, then three read tries killed in Spark's read, in its Parquet write and after
it, then three commit tries killed after publishing, inside the transaction and after it), so
four Spark runs serve seven faults. ``scripts/faults --trials N`` runs each kind on its own;
concurrent and stale runs are in test_concurrency.py. The table sinks on S3 get ``s3_restart``
(the S3 server SIGKILLed and restarted during the Spark job, then between the table commit and
the ledger's), read back by PyIceberg and delta-rs, on the warm Spark Connect server. With Avro values
(``--avro``: three writer versions through the stack's schema registry, a corrupted record per
partition; a long test) an Iceberg table's committer is killed between the table commit and the ledger's, then
inside the ledger's, then its COMMIT's answer is lost: every id lands once with its fields typed in the
reader's shape, every corrupted record as a decode error at its offset (``scripts/faults --avro --sink directory|delta``
runs the other sinks, the directory's ``_errors/`` checked too). A batch into many Iceberg tables
gets the commit's crash points, its tables read at every batch's snapshots; in the stack's Iceberg REST
catalog (``--sink iceberg-rest-multi``) the catalog is SIGKILLed and restarted with the batch's multi-table
transaction in flight (``catalog_restart``). A mirror table (``--sink iceberg-merge``: keyed upserts and
tombstones) gets crashes after Spark and around its commit, and must equal the last change of every key.
The one-task form
(``--form one-task``: ``KafkaBatchOperator`` plans, reads and commits in one worker; a long test) gets a crash
in its plan, its read and its commit on successive tries in each execution mode; every retry must
replay the planned batch.
"""

from __future__ import annotations

import json
import os

import pytest

from faults_harness.__main__ import run
from faults_harness.kinds import CHAINABLE

# Serial: its kinds restart PostgreSQL and cut the ledger link that every other test uses.
pytestmark = pytest.mark.serial


def run_one(kind: str, workdir, **options):
    seed = int(os.environ["FAULTS_SEED"]) if os.environ.get("FAULTS_SEED") else None
    results, summary, ok = run(trials=1, kinds=[kind], seed=seed, batches=1, workdir=workdir, keep=True, **options)
    (result,) = results
    assert result.fired, f"a fault was not injected: {result.fault}"
    assert ok, "\n".join(summary)
    return summary, result


# Long: the crash points on successive tries are the in-memory model's (tests/unit/test_ledger_model.py, every
# named crash point in random histories); a read killed mid-Spark is test_scheduled_ingest.py's, under the scheduler
@pytest.mark.long
def test_every_crash_point_on_successive_tries_of_one_batch(stack, tmp_path):
    summary, _ = run_one("+".join(CHAINABLE), tmp_path / "faults")
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)" for kind in CHAINABLE]


@pytest.mark.parametrize(
    # kafka_restart is long: the broker unreachable mid-read is test_network_faults.py's kafka_cut
    "kind",
    [
        pytest.param("spark_orphaned", marks=pytest.mark.long),
        "postgres_restart",
        pytest.param("kafka_restart", marks=pytest.mark.long),
    ],
)
def test_fault_kind_loses_and_duplicates_nothing(stack, tmp_path, kind):
    summary, _ = run_one(kind, tmp_path / "faults")
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"]


# Long: the S3 server killed mid-read and after publishing is test_s3_directory_sink.py's; a table commit's crashes
# on S3 are test_table_sinks.py's
@pytest.mark.long
@pytest.mark.parametrize("sink", ["iceberg", "delta"])
def test_s3_server_restarted_during_spark_and_inside_the_commit_of_a_table_sink(stack, spark_connect, tmp_path, sink):
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    summary, _ = run_one("s3_restart", tmp_path / "faults", storage="s3", sink=sink, spark_connect=connect)
    assert summary == ["s3_restart: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"]


# Long: Avro's decoding is test_avro.py's (three writer versions, corrupted records, every sink), the crashes
# between an Iceberg table's commit and the ledger's are test_table_sinks.py's (local and S3)
@pytest.mark.long
@pytest.mark.parametrize("keep_raw_value", [True, False])
def test_avro_values_through_crashes_between_the_table_commit_and_the_ledgers(
    stack, spark_connect, tmp_path, keep_raw_value
):
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    kinds = ["after_publish", "in_commit_transaction", "lost_commit_ack"]
    options = {"sink": "iceberg", "spark_connect": connect, "avro": True, "keep_raw_value": keep_raw_value}
    summary, _ = run_one("+".join(kinds), tmp_path / "faults", **options)
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)" for kind in kinds]


# Long: every sink family's lost answer (after a Kafka cut in the read) is test_network_faults_sinks.py's
@pytest.mark.long
@pytest.mark.parametrize("sink", ["directory", "delta"])
def test_a_lost_acknowledgment_of_the_ledgers_commit_commits_the_batch_once(stack, spark_connect, tmp_path, sink):
    """The COMMIT reaches PostgreSQL, its answer is lost (a wire-protocol proxy resets the link as the answer
    comes back): the try fails saying so, its retry finds the batch committed (the Delta table agrees by its
    transaction id, the directory by its manifest). Iceberg's case is in the Avro chain above."""
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    summary, result = run_one("lost_commit_ack", tmp_path / "faults", sink=sink, spark_connect=connect)
    assert summary == ["lost_commit_ack: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)"]
    assert "while committing: the COMMIT may or may not have reached the database" in result.fault


# Long: a crash between many tables' commits is test_multi_table.py's, a retry finishing a REST catalog's tables
# test_iceberg_rest.py's
@pytest.mark.long
def test_commit_crashes_of_a_batch_into_many_iceberg_tables_leave_no_torn_batch(stack, spark_connect, tmp_path):
    """Four Iceberg tables fed by a header route: the commit killed after publishing, inside its transaction
    and after it; every table read at each batch's recorded snapshots holds every batch or none."""
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    chain = "after_publish+in_commit_transaction+after_commit"
    summary, _ = run_one(chain, tmp_path / "faults", sink="iceberg-multi", spark_connect=connect)
    assert summary == [
        f"{kind}: trials 1, lost 0, duplicated 0, torn batches 0 (failed 0, faults fired 1/1)"
        for kind in chain.split("+")
    ]


# Long: a catalog that stops answering, and its lost commit answer found in the table's history, are
# test_iceberg_rest.py's
@pytest.mark.long
def test_a_rest_catalog_restarted_with_a_transaction_in_flight_leaves_no_torn_batch(stack, spark_connect, tmp_path):
    """Four Iceberg tables of the stack's REST catalog, committed in one multi-table transaction: the
    catalog is SIGKILLed and restarted while that request is in flight (held before the server, or
    its answer held after the server committed); the try fails, the next commits the batch once."""
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    options = {"sink": "iceberg-rest-multi", "storage": "s3", "spark_connect": connect, "records": (20, 40)}
    summary, result = run_one("catalog_restart", tmp_path / "faults", **options)
    assert summary == ["catalog_restart: trials 1, lost 0, duplicated 0, torn batches 0 (failed 0, faults fired 1/1)"]
    assert "POST /v1/transactions/commit" in result.fault and "the try failed: CatalogUnavailableError" in result.fault


# Long: a mirror's crash around its commit is test_mirror_tables.py's, test_delta_mirror.py's and, with an abort and
# a replay, test_iceberg_rest.py's
@pytest.mark.long
@pytest.mark.parametrize("sink", ["iceberg-merge", "delta-merge"])
def test_a_mirror_table_equals_the_last_change_of_every_key_through_crashes_around_its_commit(
    stack, spark_connect, tmp_path, sink
):
    """Keyed upserts and tombstones merged into a mirror table: the read killed after Spark, the commit killed
    after the merge was published and inside the ledger's transaction; the mirror holds each live key once,
    with its last value and where it came from, and no deleted key."""
    connect = json.loads(os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"])
    chain = "after_spark+after_publish+in_commit_transaction"
    summary, _ = run_one(chain, tmp_path / "faults", sink=sink, spark_connect=connect, records=(30, 60))
    assert summary == [
        f"{kind}: trials 1, lost 0, duplicated 0, mirror rows differing 0 (failed 0, faults fired 1/1)"
        for kind in chain.split("+")
    ]


ONE_TASK_CHAINS = {
    # spark-submit's processes are the task's own: its process group is killed in Spark's read too
    "spark-submit": ["after_plan", "during_spark_read", "after_spark", "in_commit_transaction"],
    "spark-connect": ["after_plan", "after_spark", "in_commit_transaction"],
}


# Long: the retries' replay of the planned batch is the in-memory model's (tests/unit/test_ledger_model.py);
# the one-task form's own kill inside the commit is test_one_task.py's, on Spark Connect
@pytest.mark.long
@pytest.mark.parametrize("mode", sorted(ONE_TASK_CHAINS))
def test_one_task_form_replays_its_batch_through_crashes_in_its_plan_read_and_commit(stack, request, tmp_path, mode):
    """Each crash kills the whole batch task; each retry runs it again from the plan, which must
    replay the planned batch (the harness refuses a try that started with a batch planned and ran
    another), reuse the read that succeeded and commit once."""
    connect = None
    if mode == "spark-connect":
        conn_id = request.getfixturevalue("spark_connect")
        connect = json.loads(os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"])
    kinds = ONE_TASK_CHAINS[mode]
    summary, result = run_one(
        "+".join(kinds), tmp_path / "faults", form="one-task", spark_connect=connect, records=(20, 40)
    )
    assert summary == [f"{kind}: trials 1, lost 0, duplicated 0 (failed 0, faults fired 1/1)" for kind in kinds]
    tries = [(s.run_id, s.step, s.try_number, s.ok) for s in result.steps]
    faulted = [(f"w0-run{1 + i // 3}", "batch", 1 + i % 3, False) for i in range(len(kinds))]
    assert tries == [*faulted, (f"w0-run{1 + len(kinds) // 3}", "batch", 1 + len(kinds) % 3, True)]
    last = json.loads(result.steps[-1].detail)
    assert (last["batch_id"], last["replayed"], last["committed_now"]) == (1, True, True)
    assert last["records"] == last["records_planned"] == result.verdict.read
