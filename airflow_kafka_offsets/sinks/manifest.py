"""Parquet output on S3 (``s3://`` / ``s3a://`` roots), published by a manifest instead of a rename.

S3 has no atomic rename, so an attempt's files stay where Spark wrote them and the commit step
publishes them, inside the ledger's transaction with the batch row locked, by writing the batch's
``_manifest``: one JSON object listing exactly that attempt's data files. It is written once, with
a conditional put (``If-None-Match: *``): a second writer of the same batch (a stale worker whose
lock was lost) is refused by S3 itself, and a commit retried after a crash finds its own manifest
and publishes nothing again. A replay (committed batch, row locked) replaces the manifest in one
put; an abort deletes it. Layout under the output root::

    <root>/<pipeline>/batch=<id>/_manifest              the batch's publication
    <root>/_staging/<pipeline>/batch=<id>/<attempt>/    what one Spark attempt wrote (kept once published)

Readers follow the manifest (``airflow_kafka_offsets.readers.output_files``): listing the
attempt prefixes directly would also find dead and aborted attempts.
"""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

import pyarrow.parquet as pq

from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec, batch_directory
from airflow_kafka_offsets.core.spec import validate_pipeline_name
from airflow_kafka_offsets.errors import ObjectStoreUnavailableError, OutputLocationError
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.object_storage.access import S3Access, signing_credentials
from airflow_kafka_offsets.object_storage.refusals import NO_SUCH_BUCKET, s3_refusal
from airflow_kafka_offsets.object_storage.signing import S3Request, S3Response, send
from airflow_kafka_offsets.object_storage.unavailable import server_error, unanswered
from airflow_kafka_offsets.sinks.base import LedgerStatements, Publication
from airflow_kafka_offsets.sinks.local import EMPTY_ATTEMPT, STAGING_DIR
from airflow_kafka_offsets.sinks.schema import output_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME

MANIFEST_NAME = "_manifest"
MANIFEST_FORMAT = 1
NOT_FOUND = 404
PRECONDITION_FAILED = 412


@dataclass(frozen=True)
class ManifestFile:
    uri: str
    size: int
    records: int


@dataclass(frozen=True)
class Manifest:
    """One batch's publication: which attempt, and exactly which of its files hold the batch."""

    pipeline: str
    pipeline_uid: str
    batch_id: int
    epoch: int
    attempt_id: str
    operation: str  # commit | replay
    files: tuple[ManifestFile, ...]

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)

    def to_json(self) -> bytes:
        document = {
            "format": MANIFEST_FORMAT,
            "pipeline": self.pipeline,
            "pipeline_uid": self.pipeline_uid,
            "batch_id": self.batch_id,
            "epoch": self.epoch,
            "attempt_id": self.attempt_id,
            "operation": self.operation,
            "records": self.records,
            "files": [{"uri": f.uri, "size": f.size, "records": f.records} for f in self.files],
        }
        return json.dumps(document, indent=1, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        try:
            doc = json.loads(data.decode("utf-8"))
            if doc.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {MANIFEST_FORMAT}")
            return cls(
                str(doc["pipeline"]),
                str(doc["pipeline_uid"]),
                int(doc["batch_id"]),
                int(doc["epoch"]),
                str(doc["attempt_id"]),
                str(doc["operation"]),
                tuple(ManifestFile(str(f["uri"]), int(f["size"]), int(f["records"])) for f in doc["files"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise OutputLocationError(f"manifest {where} is not a batch manifest ({exc}); nothing was read") from exc


def manifest_uri(output_uri: str) -> str:
    return files.join(output_uri, MANIFEST_NAME)


class ManifestDirectorySink:
    """Output root on S3; ``s3`` says how to reach it (the object-storage connection)."""

    def __init__(self, root: str, s3: S3Access | None) -> None:
        self.root = files.location_uri(root)
        self.storage = files.Storage(s3)

    # -- objects ---------------------------------------------------------------------------------

    def _send(self, method: str, uri: str, body: bytes = b"", headers: dict[str, str] | None = None) -> S3Response:
        """One signed request; refusals that retrying cannot fix become errors naming the bucket, and no
        answer an :class:`ObjectStoreUnavailableError` (an OSError: the task's retry tries again)."""
        req = S3Request(method, "/" + uri.split("://", 1)[1], body, headers or {})
        access = self.storage.s3_access(uri)
        creds = signing_credentials(access, uri)
        try:
            response = send(creds, req, access.request_timeout_s)
        except OSError as exc:
            raise ObjectStoreUnavailableError(
                unanswered(creds.endpoint, method, uri, access.request_timeout_s, exc)
            ) from exc
        if response.status in (401, 403) or (response.status == NOT_FOUND and _code(response) == NO_SUCH_BUCKET):
            raise OutputLocationError(s3_refusal(uri, _code(response) or str(response.status)))
        return response

    def read_manifest(self, output_uri: str) -> Manifest | None:
        """The manifest published at a batch's output location, if any."""
        where = manifest_uri(output_uri)
        response = self._send("GET", where)
        if response.status == NOT_FOUND:
            return None
        _expect(response, where, "GET")
        return Manifest.from_json(response.body, where)

    # -- Sink --------------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {"format": "directory", "location": self.root, "table": None}

    def check_writable(self, decode: DecodeSpec | None = None) -> None:
        """Put and delete a probe object: a wrong key, a missing bucket or no permission show here."""
        probe = files.join(self.root, f".write-probe-{uuid.uuid4().hex}")
        _expect(self._send("PUT", probe, b""), probe, "PUT")
        _expect(self._send("DELETE", probe), probe, "DELETE")

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        validate_pipeline_name(pipeline)
        return files.join(self.root, pipeline, batch_directory(batch_id))

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        validate_pipeline_name(pipeline)
        return files.join(self.root, STAGING_DIR, pipeline, batch_directory(batch_id), attempt_id)

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        return self.storage.read_report(staging_uri)

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        manifest = self.read_manifest(self.output_uri(plan.pipeline, plan.batch_id))
        return manifest.attempt_id if manifest and manifest.pipeline_uid == pipeline_uid else None

    def publish(self, tx: LedgerStatements, publication: Publication) -> None:
        """Write the batch's manifest listing the attempt's files: once for a commit, replacing for a replay."""
        plan = publication.plan
        output = self.output_uri(plan.pipeline, plan.batch_id)
        attempt_id, staging = publication.attempt_id, publication.staging_uri
        if staging is None:
            attempt_id, staging = EMPTY_ATTEMPT, self.staging_uri(plan.pipeline, plan.batch_id, EMPTY_ATTEMPT)
        current = self.read_manifest(output)
        if not publication.replay and current is not None and current.attempt_id == attempt_id:
            return  # published by a commit that crashed before the ledger's: nothing to add
        if publication.staging_uri is None:
            self._stage_empty(staging, plan.pipeline, plan.batch_id, publication.decode)
        data = self.storage.parquet_files(staging)
        if self.storage.read_report(staging) is None or not data:
            raise OutputLocationError(f"staged output {staging} is incomplete: no report or no Parquet files")
        manifest = Manifest(
            plan.pipeline,
            publication.pipeline_uid,
            plan.batch_id,
            plan.epoch,
            str(attempt_id),
            "replay" if publication.replay else "commit",
            tuple(ManifestFile(f.uri, f.size, f.records) for f in data),
        )
        where = manifest_uri(output)
        if publication.replay:
            _expect(self._send("PUT", where, manifest.to_json()), where, "PUT")
            if current is not None and current.attempt_id != attempt_id:
                self.discard_attempt(self.staging_uri(plan.pipeline, plan.batch_id, current.attempt_id))
            return
        response = self._send("PUT", where, manifest.to_json(), {"If-None-Match": "*"})
        if response.status == PRECONDITION_FAILED:
            raise OutputLocationError(
                f"batch {plan.batch_id} of {plan.pipeline!r}: {where} was published meanwhile by another writer "
                f"(not attempt {attempt_id}); nothing of this attempt was published. Run the commit again: it "
                "takes the published attempt if the ledger's pipeline wrote it, or remove the stale manifest"
            )
        _expect(response, where, "PUT")

    def _stage_empty(self, staging: str, pipeline: str, batch_id: int, decode: DecodeSpec | None) -> None:
        """A batch that reads no records gets one Parquet file with no rows, so every batch reads alike."""
        buffer = io.BytesIO()
        pq.write_table(output_schema(decode).empty_table(), buffer)
        self.storage.write_bytes(files.join(staging, "part-00000-empty.parquet"), buffer.getvalue())
        report = {"format": 1, "pipeline": pipeline, "batch_id": batch_id, "attempt_id": None, "partitions": []}
        self.storage.write_bytes(files.join(staging, REPORT_NAME), json.dumps(report).encode("utf-8"))

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Delete a published, never committed batch's manifest; returns its attempt's staging to discard.

        If the abort's transaction then fails, the batch is still planned and its attempt still
        staged: the next commit publishes it again.
        """
        output = self.output_uri(plan.pipeline, plan.batch_id)
        manifest = self.read_manifest(output)
        if manifest is None:
            return None
        _expect(self._send("DELETE", manifest_uri(output)), manifest_uri(output), "DELETE")
        return self.staging_uri(plan.pipeline, plan.batch_id, manifest.attempt_id)

    def in_use(self, staging_uri: str) -> bool:
        """The batch's manifest lists this attempt."""
        batch_dir, attempt_id = staging_uri.rstrip("/").rsplit("/", 1)
        pipeline_dir, batch = batch_dir.rsplit("/", 1)
        pipeline = pipeline_dir.rsplit("/", 1)[1]
        manifest = self.read_manifest(files.join(self.root, pipeline, batch))
        return manifest is not None and manifest.attempt_id == attempt_id

    def discard_attempt(self, staging_uri: str) -> None:
        """Remove an attempt's files, unless the batch's manifest lists them."""
        if self.storage.exists(staging_uri) and not self.in_use(staging_uri):
            self.storage.remove_tree(staging_uri)

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        validate_pipeline_name(pipeline)
        return self.storage.batch_attempts(files.join(self.root, STAGING_DIR, pipeline))

    def leftover_output(self, output_uri: str) -> str | None:
        return output_uri if self.read_manifest(output_uri) is not None else None

    def remove_output(self, output_uri: str) -> bool:
        """Delete an aborted batch's manifest; its attempt's files are then swept like any ended attempt's."""
        if self.read_manifest(output_uri) is None:
            return False
        _expect(self._send("DELETE", manifest_uri(output_uri)), manifest_uri(output_uri), "DELETE")
        return True

    def exists(self, uri: str) -> bool:
        return self.storage.exists(uri)


def _code(response: S3Response) -> str | None:
    """The ``<Code>`` of an S3 error response, if it has one."""
    try:
        return ElementTree.fromstring(response.body).findtext("Code") if response.body else None
    except ElementTree.ParseError:
        return None


def _expect(response: S3Response, uri: str, method: str) -> None:
    """A server error (5xx) is an :class:`ObjectStoreUnavailableError`, which the task's retry tries again;
    any other refusal is final."""
    if 200 <= response.status < 300:
        return
    if response.status >= 500:
        raise ObjectStoreUnavailableError(server_error(response.status, _code(response), method, uri))
    raise OutputLocationError(f"S3 answered {response.status} {_code(response) or ''} to {method} {uri}")
