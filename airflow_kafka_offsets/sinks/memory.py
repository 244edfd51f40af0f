"""A sink in memory, and the Spark job that fills its staging from in-memory Kafka.

:class:`MemorySink` keeps the sink contract (:mod:`~airflow_kafka_offsets.sinks.base`) as the
directory sink does: an attempt stages its records and report, ``publish`` moves them to the batch's
output (replacing what was there, never adding to it), ``withdraw`` moves them back. Together with
:class:`~airflow_kafka_offsets.ledger.memory.MemoryLedger` and
:class:`~airflow_kafka_offsets.clients.memory.MemoryKafka`, the plan, read and commit steps run end
to end in one process; :meth:`MemorySink.committed_records` is what a reader of the output sees.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_kafka_offsets.core.model import BatchPlan, DecodeSpec, TopicPartition
from airflow_kafka_offsets.errors import OutputLocationError
from airflow_kafka_offsets.sinks.base import LedgerStatements, Publication
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_FORMAT, summarize_rows

Record = tuple[str, int, int, bytes]
"""One record of a batch's output: topic, partition, offset, value."""


@dataclass(frozen=True)
class StagedFiles:
    """What one attempt wrote: its records and its report (``attempt_id`` None: a batch with no records)."""

    attempt_id: str | None
    records: tuple[Record, ...]
    report: Mapping[str, Any]


class RecordLog(Protocol):
    """Where the in-memory Spark job reads a range (``MemoryKafka``)."""

    def records(self, tp: TopicPartition, start: int, end: int) -> list[tuple[int, bytes]]: ...


class MemorySink:
    """Batches' outputs and attempts' staging, by URI, in this process's memory."""

    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self.staged: dict[str, StagedFiles] = {}
        self.outputs: dict[str, tuple[str, StagedFiles]] = {}  # output URI -> (staging URI it came from, files)
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"format": "memory", "location": f"memory://{self.name}"}

    def check_writable(self, decode: DecodeSpec | None) -> None:
        """Any decoding fits: the output keeps records as Kafka holds them."""

    def output_uri(self, pipeline: str, batch_id: int) -> str:
        return f"memory://{self.name}/{pipeline}/{batch_id}"

    def staging_uri(self, pipeline: str, batch_id: int, attempt_id: str) -> str:
        return f"memory://{self.name}/_staging/{pipeline}/{batch_id}/{attempt_id}"

    def stage(self, staging_uri: str, files: StagedFiles) -> None:
        """What a Spark attempt does at its end: write its records and report."""
        with self._lock:
            self.staged[staging_uri] = files

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        with self._lock:
            files = self.staged.get(staging_uri) or self._output(staging_uri)
        return None if files is None else dict(files.report)

    def _output(self, uri: str) -> StagedFiles | None:
        found = self.outputs.get(uri)
        return None if found is None else found[1]

    def published_attempt(self, pipeline_uid: str, plan: BatchPlan) -> str | None:
        with self._lock:
            found = self.outputs.get(plan.output_uri)
        return None if found is None else found[1].attempt_id

    def publish(self, tx: LedgerStatements, publication: Publication) -> None:
        """Move the attempt's files to the batch's output, replacing whatever an earlier attempt left there."""
        plan = publication.plan
        with self._lock:
            if publication.staging_uri is None:
                report = {"format": REPORT_FORMAT, "pipeline": plan.pipeline, "batch_id": plan.batch_id}
                self.outputs[plan.output_uri] = ("", StagedFiles(None, (), report | {"partitions": []}))
                return
            files = self.staged.pop(publication.staging_uri, None)
            if files is None:
                raise OutputLocationError(f"staged output {publication.staging_uri} is incomplete: no report")
            self.outputs[plan.output_uri] = (publication.staging_uri, files)

    def withdraw(self, tx: LedgerStatements, pipeline_uid: str, plan: BatchPlan) -> str | None:
        """Move a published, never committed output back into its staging; returns where it went."""
        with self._lock:
            found = self.outputs.pop(plan.output_uri, None)
            if found is None:
                return None
            staging_uri, files = found
            staging_uri = staging_uri or self.staging_uri(plan.pipeline, plan.batch_id, "empty")
            self.staged[staging_uri] = files
            return staging_uri

    def in_use(self, staging_uri: str) -> bool:
        with self._lock:
            return any(source == staging_uri for source, _ in self.outputs.values())

    def discard_attempt(self, staging_uri: str) -> None:
        with self._lock:
            self.staged.pop(staging_uri, None)

    def staged_attempts(self, pipeline: str) -> dict[int, list[str]]:
        prefix = f"memory://{self.name}/_staging/{pipeline}/"
        found: dict[int, list[str]] = {}
        with self._lock:
            for uri in sorted(self.staged):
                if uri.startswith(prefix):
                    found.setdefault(int(uri[len(prefix) :].split("/")[0]), []).append(uri)
        return found

    def leftover_output(self, output_uri: str) -> str | None:
        return output_uri if self.exists(output_uri) else None

    def remove_output(self, output_uri: str) -> bool:
        with self._lock:
            return self.outputs.pop(output_uri, None) is not None

    def exists(self, uri: str) -> bool:
        with self._lock:
            return uri in self.outputs or uri in self.staged

    def committed_records(self, output_uris: list[str]) -> list[Record]:
        """The records a reader of these outputs sees, in order."""
        with self._lock:
            return [r for uri in output_uris if uri in self.outputs for r in self.outputs[uri][1].records]


class MemorySpark:
    """A Spark job's twin: reads the job's ranges from a record log and stages them in a :class:`MemorySink`.

    Called as :data:`~airflow_kafka_offsets.service.context.Submit` with the job document the batch
    steps build; the report it stages is the Spark app's, in its documented format.
    """

    def __init__(self, kafka: RecordLog, sink: MemorySink) -> None:
        self._kafka = kafka
        self._sink = sink
        self.jobs = 0

    def __call__(self, job: dict[str, Any]) -> None:
        self.jobs += 1
        records = tuple(
            (str(r["topic"]), int(r["partition"]), offset, value)
            for r in job["ranges"]
            for offset, value in self._kafka.records(
                TopicPartition(r["topic"], int(r["partition"])), r["start"], r["end"]
            )
        )
        partitions = summarize_rows((t, p, o, len(v), False) for t, p, o, v in records)
        report = {
            "format": REPORT_FORMAT,
            "pipeline": job["pipeline"],
            "batch_id": job["batch_id"],
            "attempt_id": job["attempt_id"],
            "partitions": partitions,
            "output_bytes": sum(len(v) for *_, v in records),
        }
        self._sink.stage(job["staging_uri"], StagedFiles(job["attempt_id"], records, report))
