"""The directory sink on the stack's S3 server: published by a manifest, not a rename.

Spark writes each attempt under its own prefix; the commit writes the batch's ``_manifest`` once
(conditional put) in the ledger's commit. Two Spark batches: one whose commit loses S3's answer to
the manifest's put (the stack's fault proxy black-holes it), then dies after publishing and inside
the ledger's transaction before it commits once, one that dies after publishing and is aborted.
Two readers check every id exactly once: the package's (ledger, then manifest) and plain pyarrow
listing the manifests under the output root.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import devstack
from airflow_kafka_offsets.core.model import BatchState
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import ObjectStoreUnavailableError, OutputLocationError, SparkJobError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import S3Access, s3_access
from airflow_kafka_offsets.readers import committed_outputs, output_files, read_output
from airflow_kafka_offsets.runtime import object_storage
from airflow_kafka_offsets.service import faults
from airflow_kafka_offsets.service.commit import commit_batch
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.sweep import sweep
from airflow_kafka_offsets.sinks import ManifestDirectorySink, Publication
from devstack.toxiproxy_api import Client, Toxic
from faults_harness.lake_readers import manifest_listing

from .helpers import assert_exactly_once, produce, refused
from .pipeline import ACTOR, commit, commit_dies_at, operation_context, plan, read, sink_of
from .test_object_store import s3fs

pytestmark = pytest.mark.integration
ANSWER_TIMEOUT_S = 1  # the proxied connection's extra timeout: how long the lost answer is waited for


def rows_listing_manifests(stack, prefix: str) -> tuple[list[str], list[dict]]:
    """What a reader without this package sees: every ``batch=*/_manifest`` under the pipeline, and its files."""
    return manifest_listing(s3fs(stack), prefix)


def staged_parquet(stack, staging_uri: str) -> list[str]:
    fs = s3fs(stack)
    infos = fs.get_file_info(pafs.FileSelector(staging_uri.removeprefix("s3://"), recursive=True))
    return sorted("s3://" + i.path for i in infos if i.path.endswith(".parquet") and "/_errors/" not in i.path)


def attempt_of(ledger: Ledger, pipeline: str, batch_id: int):
    with ledger.transaction() as tx:
        attempt = tx.latest_succeeded_attempt(pipeline, batch_id)
    assert attempt is not None
    return attempt


class AnswerLostFromTheManifestPut(ManifestDirectorySink):
    """The sink through the stack's fault proxy, whose S3 link stops S3's answers (toxiproxy's ``timeout``
    toxic on the downstream) from the manifest's put on: S3 gets the put and stores the manifest, this
    worker never hears so. Only this sink's connections pass the proxy."""

    def __init__(self, root: str, access: S3Access, links: Client) -> None:
        super().__init__(root, access)
        self.links = links

    def _send(self, method: str, uri: str, body: bytes = b"", headers: dict[str, str] | None = None):
        if method == "PUT" and uri.endswith("/_manifest"):
            self.links.add("s3", Toxic("answer-lost", "timeout", "downstream", {"timeout": 0}))
        return super()._send(method, uri, body, headers)


def commit_losing_the_put_answer(ledger: Ledger, spec, batch_id: int) -> tuple[str, float, str]:
    """A commit of ``batch_id`` whose manifest put is answered into a black hole: its error, seconds, endpoint."""
    proxied = devstack.start_toxiproxy()
    links = Client(proxied.api_url)
    connection = json.loads(proxied.env["AIRFLOW_CONN_KAFKA_OFFSETS_S3"])
    extra = {**connection["extra"], "timeout": ANSWER_TIMEOUT_S}
    access = s3_access("s3_proxied", connection["login"], connection["password"], extra)
    sink = AnswerLostFromTheManifestPut(spec.output_root, access, links)
    started = time.monotonic()
    try:
        with refused(ObjectStoreUnavailableError) as lost:
            commit_batch(ledger, sink, spec.name, batch_id, ACTOR)
    finally:
        links.remove("s3", "answer-lost")
    assert isinstance(lost.value, OSError)  # what retries of OSErrors still catch
    assert connection["password"] not in str(lost.value)
    return str(lost.value), time.monotonic() - started, connection["extra"]["endpoint_url"]


def test_batches_publish_by_manifest_once_through_crashes_and_an_abort(stack, ledger, make_topic) -> None:
    topic = make_topic(partitions=2)
    base = f"{stack.s3_bucket}/{uuid.uuid4().hex}"
    spec = build_spec("s3dir", [topic], f"s3a://{base}/out")
    sink = sink_of(ledger, spec)
    assert isinstance(sink, ManifestDirectorySink) and sink.describe()["location"] == f"s3://{base}/out"
    first = produce(stack.bootstrap_servers, topic, 240, 2)

    # batch 1: published, then the worker dies twice before the ledger commits; the retry commits once
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    attempt = attempt_of(ledger, spec.name, 1)
    assert attempt.staging_uri == f"s3://{base}/out/_staging/s3dir/batch=000000000001/{attempt.attempt_id}"
    planned_cursors = ledger.cursors(spec.name)

    # the manifest's put reaches S3, its answer does not: the try fails naming S3, the put and the timeout;
    # the batch stays planned, and each next try finds the manifest published (a second put would be refused)
    message, took, endpoint = commit_losing_the_put_answer(ledger, spec, 1)
    print(f"lost answer: the commit try failed {took:.2f}s after it started: {message}")
    assert message == (
        f"S3 at {endpoint} did not answer PUT s3://{base}/out/s3dir/batch=000000000001/_manifest within 1 s (the "
        "object storage connection's extra key timeout, default 10 s). Whether S3 applied the PUT is unknown; "
        "nothing of this step is committed in the ledger (a batch being committed stays planned), and the next run "
        "reads the manifest to find whether the batch was published, never twice. Next: check that this worker "
        f"reaches S3 at {endpoint}, or raise timeout for a slow link, then retry the task"
    )
    assert ANSWER_TIMEOUT_S <= took < ANSWER_TIMEOUT_S + 10
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT batch_id, state, records_committed, committed_at FROM {s}.batches WHERE pipeline = %s",
            (spec.name,),
        )
    assert rows == [(1, "planned", None, None)]
    assert ledger.cursors(spec.name) == planned_cursors
    for point in ("after_publish", "in_commit_transaction"):
        commit_dies_at(ledger, spec, 1, point)
        assert ledger.batch(spec.name, 1).state is BatchState.PLANNED
        manifest = sink.read_manifest(sink.output_uri(spec.name, 1))
        assert manifest is not None and manifest.attempt_id == attempt.attempt_id
    done = commit(ledger, spec, 1)
    assert (done.committed_now, done.records) == (True, 240)
    manifest = sink.read_manifest(sink.output_uri(spec.name, 1))
    assert manifest is not None
    assert (manifest.batch_id, manifest.attempt_id, manifest.records, manifest.operation) == (
        1,
        attempt.attempt_id,
        240,
        "commit",
    )
    assert [f.uri for f in manifest.files] == staged_parquet(stack, attempt.staging_uri)  # exactly its files

    # batch 2: read, published, the worker dies, then the batch is aborted: its manifest and files go
    second = produce(stack.bootstrap_servers, topic, 60, 2)
    outcome = plan(ledger, spec, stack)
    read(ledger, spec, stack, outcome)
    aborted = attempt_of(ledger, spec.name, 2)
    # a stale writer of batch 1 (its lock lost) cannot replace batch 1's manifest: S3 refuses the second put
    with ledger.transaction() as tx:
        uid = tx.pipeline_uid(spec.name)
    stale = Publication(uid, ledger.batch(spec.name, 1).plan, aborted.attempt_id, aborted.staging_uri, 0, None)
    with refused(OutputLocationError, "was published meanwhile by another writer"):
        with ledger.transaction() as tx:
            sink.publish(tx, stale)
    assert sink.read_manifest(sink.output_uri(spec.name, 1)) == manifest
    commit_dies_at(ledger, spec, 2, "after_publish")
    assert sink.published_attempt(uid, outcome.plan) == aborted.attempt_id
    abort_planned_batch(operation_context(ledger, stack), spec.name, "test")
    assert sink.read_manifest(sink.output_uri(spec.name, 2)) is None
    assert not sink.exists(aborted.staging_uri)

    # readers: the package's (ledger, then each manifest) and pyarrow listing the manifests
    storage = object_storage(spec.output_root)
    outputs = committed_outputs(ledger, spec.name)
    assert [(o.batch_id, o.uri) for o in outputs] == [(1, sink.output_uri(spec.name, 1))]
    assert output_files(outputs[0], storage) == [f.uri for f in manifest.files]
    assert_exactly_once(pa.concat_tables([read_output(o, storage) for o in outputs]).to_pylist(), first)
    manifests, rows = rows_listing_manifests(stack, f"{base}/out/s3dir")
    assert manifests == [f"{base}/out/s3dir/batch=000000000001/_manifest"]
    assert_exactly_once(rows, first)
    assert not {p["id"] for p in second} & {r["key"].decode() for r in rows}

    # the sweep keeps the committed attempt (its manifest lists it) and finds nothing else
    assert sweep(ledger, sink, spec.name, dry_run=False, actor=ACTOR).items == ()
    assert sink.staged_attempts(spec.name) == {1: [attempt.staging_uri]}


def test_a_refused_key_is_named_before_anything_is_planned(stack, ledger, make_topic, monkeypatch) -> None:
    """No Spark run: the sink's probe write meets the refusal first, with the bucket and what to check."""
    wrong = stack.s3_connection()
    wrong["password"] = "not-the-secret"
    monkeypatch.setenv("AIRFLOW_CONN_WRONG_KEY_S3", json.dumps(wrong))
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID", "wrong_key_s3")
    spec = build_spec("denied", [make_topic(partitions=1)], f"s3://{stack.s3_bucket}/{uuid.uuid4().hex}/out")
    with refused(OutputLocationError, rf"^S3 refused access to bucket '{stack.s3_bucket}' \(\w+, at s3://") as refusal:
        plan(ledger, spec, stack)
    assert "object_storage_conn_id" in str(refusal.value) and "not-the-secret" not in str(refusal.value)
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT count(*) FROM {s}.pipelines") == [(0,)]


# Serial: it kills the S3 server the other tests share.
@pytest.mark.serial
def test_s3_server_killed_mid_read_and_after_publish_loses_nothing(stack, ledger, make_topic) -> None:
    """SeaweedFS SIGKILLed (and restarted on its data) while Spark writes, then between publish and commit."""
    topic = make_topic(partitions=2)
    base = f"{stack.s3_bucket}/{uuid.uuid4().hex}"
    spec = build_spec("s3kill", [topic], f"s3://{base}/out")
    produced = produce(stack.bootstrap_servers, topic, 200, 2)
    outcome = plan(ledger, spec, stack)
    failures: list[BaseException] = []

    def read_batch() -> None:
        try:
            read(ledger, spec, stack, outcome)
        except (SparkJobError, OSError) as exc:
            # S3 gone long enough for S3A to give up, or while the worker read Spark's report (Spark
            # already done): the attempt is recorded failed and the retry replays the plan
            failures.append(exc)

    reader = threading.Thread(target=read_batch)
    reader.start()
    deadline = time.monotonic() + 120
    while not any(a.state == "running" for a in attempts_of(ledger, spec.name)) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(8)  # Spark is up and reading or writing
    assert reader.is_alive(), "the read ended before the S3 server could be killed under it"
    devstack.restart_s3(hard=True)
    reader.join(600)
    if failures:
        read(ledger, spec, stack, outcome)

    killed: list[str] = []

    def kill_s3(point: str) -> None:
        if point == "after_publish":
            devstack.restart_s3(hard=True)
            killed.append(point)

    faults.add_observer(kill_s3)
    try:
        done = commit(ledger, spec, 1)
    finally:
        faults._observers.remove(kill_s3)
    assert (done.committed_now, done.records, killed) == (True, 200, ["after_publish"])
    outputs = committed_outputs(ledger, spec.name)
    storage = object_storage(spec.output_root)
    assert_exactly_once(read_output(outputs[0], storage).to_pylist(), produced)
    assert_exactly_once(rows_listing_manifests(stack, f"{base}/out/s3kill")[1], produced)
    # a failed attempt's files are swept; the committed one is kept
    sweep(ledger, sink_of(ledger, spec), spec.name, dry_run=False, actor=ACTOR)
    committed = attempt_of(ledger, spec.name, 1)
    assert sink_of(ledger, spec).staged_attempts(spec.name) == {1: [committed.staging_uri]}


def attempts_of(ledger: Ledger, pipeline: str):
    with ledger.transaction() as tx:
        return tx.attempts(pipeline, [1])
