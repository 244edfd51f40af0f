"""Parse the Spark app's result report (a documented JSON format) into a :class:`BatchReport`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, PartitionReport
from airflow_kafka_offsets.errors import ReportMismatchError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_FORMAT, range_problems


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def parse_report(raw: Mapping[str, Any]) -> BatchReport:
    """Parse once where the report enters (the staging file, the ledger); the rest passes the result."""
    if raw.get("format") != REPORT_FORMAT:
        raise ReportMismatchError(f"unsupported report format {raw.get('format')!r}, expected {REPORT_FORMAT}")
    try:
        partitions = tuple(
            PartitionReport(
                topic=str(p["topic"]),
                partition=int(p["partition"]),
                records=int(p["records"]),
                min_offset=_optional_int(p.get("min_offset")),
                max_offset=_optional_int(p.get("max_offset")),
                distinct_offsets=int(p["distinct_offsets"]),
                payload_bytes=int(p.get("payload_bytes") or 0),
                decode_errors=int(p.get("decode_errors") or 0),
            )
            for p in raw["partitions"]
        )
        return BatchReport(
            pipeline=str(raw["pipeline"]),
            batch_id=int(raw["batch_id"]),
            partitions=partitions,
            output_bytes=int(raw.get("output_bytes") or 0),
            spark_version=str(raw.get("spark_version", "")),
            extra={k: raw[k] for k in ("application_id", "master", "attempt_id") if k in raw},
            raw=dict(raw),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportMismatchError(f"malformed batch report: {exc!r}") from exc


def check_report(plan: BatchPlan, report: BatchReport) -> None:
    """Refuse to commit output that does not fit the plan.

    Offsets may have gaps (transaction markers, aborted records, compaction), so
    a partition may hold fewer records than its span, never more, never an
    offset outside ``[start, end)`` and never the same offset twice.
    """
    problems: list[str] = []
    if (report.pipeline, report.batch_id) != (plan.pipeline, plan.batch_id):
        problems.append(
            f"report is for {report.pipeline!r} batch {report.batch_id}, "
            f"expected {plan.pipeline!r} batch {plan.batch_id}"
        )
    problems += range_problems(
        (r.to_json() for r in plan.ranges),
        (
            {
                "topic": p.topic,
                "partition": p.partition,
                "records": p.records,
                "distinct_offsets": p.distinct_offsets,
                "min_offset": p.min_offset,
                "max_offset": p.max_offset,
            }
            for p in report.partitions
        ),
    )
    if problems:
        raise ReportMismatchError(
            f"batch {plan.batch_id} of pipeline {plan.pipeline!r} does not match its plan: " + "; ".join(problems)
        )
