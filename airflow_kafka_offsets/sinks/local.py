"""Parquet output on a local or mounted filesystem (file:// URIs), published by atomic rename.

Layout under the output root::

    <root>/<pipeline>/batch=<id>/                    committed output (one dir per batch)
    <root>/_staging/<pipeline>/batch=<id>/<attempt>/ what one Spark attempt wrote

The output location is a function of (pipeline, batch id) only, so a replay
lands in the same place. Staging sits under the same root so publishing is a
rename on one filesystem.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.parquet as pq

from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec, batch_directory
from airflow_kafka_offsets.core.spec import validate_pipeline_name
from airflow_kafka_offsets.errors import OutputLocationError
from airflow_kafka_offsets.sinks.base import LedgerStatements, Publication
from airflow_kafka_offsets.sinks.schema import output_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME

STAGING_DIR = "_staging"
EMPTY_ATTEMPT = "empty"


RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _file_uri(path: Path) -> str:
    """A file:// URI as Spark and Hadoop take it: not percent-encoded ('=' stays '=')."""
    return f"file://{path}"


def _local_path(uri_or_path: str) -> Path:
    parsed = urlparse(uri_or_path)
    if parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme else uri_or_path)
        if not path.is_absolute():
            raise OutputLocationError(f"output location {uri_or_path!r} must be an absolute path or file:// URI")
        return path
    raise OutputLocationError(
        f"output location {uri_or_path!r}: scheme {parsed.scheme!r} is not supported by the local sink "
        "(use an absolute path or a file:// URI on a filesystem the Airflow worker and Spark share)"
    )


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2); False where unsupported."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result: int = renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    return result == 0


class LocalDirectorySink:
    """Output root on a POSIX filesystem shared by the Airflow worker and Spark."""

    def __init__(self, root: str) -> None:
        self.root = _local_path(root).resolve()

    def _inside(self, path: Path) -> Path:
        resolved = path.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise OutputLocationError(f"path {path} escapes the output root {self.root}")
        return resolved

    def describe(self) -> dict[str, Any]:
        return {"format": "directory", "location": _file_uri(self.root), "table": None}

    def check_writable(self, decode: DecodeSpec | None = None) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe-{uuid.uuid4().hex}"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise OutputLocationError(f"output root {self.root} is not writable: {exc.strerror}") from exc

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        validate_pipeline_name(pipeline)
        return _file_uri(self._inside(self.root / pipeline / batch_directory(batch_id)))

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        validate_pipeline_name(pipeline)
        return _file_uri(self._inside(self.root / STAGING_DIR / pipeline / batch_directory(batch_id) / attempt_id))

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        path = self._inside(_local_path(staging_uri)) / REPORT_NAME
        if not path.exists():
            return None
        report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return report

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        attempt_id = (self.read_report(self.output_uri(plan.pipeline, plan.batch_id)) or {}).get("attempt_id")
        return str(attempt_id) if attempt_id else None

    def publish(self, tx: LedgerStatements, publication: Publication) -> None:
        """Rename the attempt's directory to the batch's directory under this sink's root."""
        plan = publication.plan
        if publication.staging_uri is None:
            self.publish_empty(plan.pipeline, plan.batch_id, publication.decode)
        else:
            self.publish_directory(publication.staging_uri, self.output_uri(plan.pipeline, plan.batch_id))

    def publish_directory(self, staging_uri: str, output_uri: str) -> None:
        """Make the staged attempt the batch's output, replacing whatever an earlier attempt left.

        Called while the batch's ledger row is locked, so no two runs publish at once.
        A staged attempt is consumed: it is moved, not copied.
        """
        staged = self._inside(_local_path(staging_uri))
        final = self._inside(_local_path(output_uri))
        if not (staged / REPORT_NAME).exists():
            raise OutputLocationError(f"staged output {staged} is incomplete: no {REPORT_NAME}")
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            if not _exchange(staged, final):
                trash = staged.with_name(staged.name + ".replaced")
                final.rename(trash)
                staged.rename(final)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                shutil.rmtree(staged, ignore_errors=True)  # now holds the replaced output
        else:
            staged.rename(final)
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def publish_empty(self, pipeline: str, batch_id: int, decode: DecodeSpec | None) -> None:
        """Give a batch that reads no records an output too: one Parquet file with no rows.

        Readers can then read every committed batch's location alike. Staged and published like
        an attempt, so it replaces whatever the location held.
        """
        staged = self._inside(_local_path(self.staging_uri(pipeline, batch_id, EMPTY_ATTEMPT)))
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        pq.write_table(output_schema(decode).empty_table(), staged / "part-00000-empty.parquet")
        (staged / "_SUCCESS").touch()
        report = {"format": 1, "pipeline": pipeline, "batch_id": batch_id, "attempt_id": None, "partitions": []}
        (staged / REPORT_NAME).write_text(json.dumps(report), encoding="utf-8")
        self.publish_directory(_file_uri(staged), self.output_uri(pipeline, batch_id))

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Take a published (never committed) output back out of readers' sight, into staging.

        Called while the batch's ledger row is locked, before its abort is committed: if that
        transaction fails, the batch is still planned and its attempt is staged again where
        it was. Returns where the output went, or None.
        """
        return self._move_back(
            self.output_uri(plan.pipeline, plan.batch_id),
            lambda attempt_id: self.staging_uri(plan.pipeline, plan.batch_id, attempt_id),
        )

    def _move_back(self, output_uri: str, staging_uri_of: Callable[[str], str]) -> str | None:
        final = self._inside(_local_path(output_uri))
        if not final.exists():
            return None
        attempt_id = str((self.read_report(output_uri) or {}).get("attempt_id") or f"withdrawn-{uuid.uuid4().hex}")
        target = self._inside(_local_path(staging_uri_of(attempt_id)))
        if target.exists():
            target = target.with_name(f"{target.name}.withdrawn-{uuid.uuid4().hex}")
        target.parent.mkdir(parents=True, exist_ok=True)
        final.rename(target)
        return _file_uri(target)

    def leftover_output(self, output_uri: str) -> str | None:
        return output_uri if self.exists(output_uri) else None

    def remove_output(self, output_uri: str) -> bool:
        """Delete a batch's output directory (of an aborted batch); True if there was one."""
        final = self._inside(_local_path(output_uri))
        if not final.exists():
            return False
        shutil.rmtree(final)
        return True

    def in_use(self, staging_uri: str) -> bool:
        return False  # a published attempt moved out of staging

    def discard_attempt(self, staging_uri: str) -> None:
        """Remove one attempt's staging, and the batch's staging directory once it is empty."""
        staged = self._inside(_local_path(staging_uri))
        shutil.rmtree(staged, ignore_errors=True)
        for leftover in staged.parent.glob(f"{staged.name}.*"):  # .replaced / .withdrawn-* of this attempt
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            staged.parent.rmdir()
        except OSError:  # other attempts are still staged there
            pass

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        """Staging directories on disk per batch id (attempt directories and their leftovers)."""
        validate_pipeline_name(pipeline)
        found: dict[int, list[str]] = {}
        for batch_dir in sorted((self.root / STAGING_DIR / pipeline).glob("batch=*")):
            try:
                batch_id = int(batch_dir.name.removeprefix("batch="))
            except ValueError:
                continue
            found[batch_id] = [_file_uri(d) for d in sorted(batch_dir.iterdir()) if d.is_dir()]
        return found

    def exists(self, uri: str) -> bool:
        return self._inside(_local_path(uri)).exists()
