"""Checking Spark's report against the plan before anything is committed."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.core.report import check_report, parse_report
from airflow_kafka_offsets.errors import ReportMismatchError

PLAN = BatchPlan("p", 3, 0, (PartitionRange("t", 0, 10, 20, 10), PartitionRange("t", 1, 5, 5, 5)), "file:///o")


def report(*parts, pipeline="p", batch_id=3):
    return parse_report(
        {
            "format": 1,
            "pipeline": pipeline,
            "batch_id": batch_id,
            "output_bytes": 100,
            "spark_version": "4.2.0",
            "partitions": [
                {
                    "topic": "t",
                    "partition": p,
                    "records": n,
                    "min_offset": lo,
                    "max_offset": hi,
                    "distinct_offsets": d,
                    "payload_bytes": 1,
                }
                for p, n, lo, hi, d in parts
            ],
        }
    )


def test_exact_report_passes():
    check_report(PLAN, report((0, 10, 10, 19, 10)))


def test_gaps_are_allowed():
    check_report(PLAN, report((0, 7, 11, 18, 7)))  # transaction markers / compaction


def test_no_records_at_all_is_allowed():
    check_report(PLAN, report())


@pytest.mark.parametrize(
    "part,match",
    [
        ((0, 11, 10, 19, 11), "exceed the planned span"),
        ((0, 10, 9, 18, 10), r"outside the planned range \[10, 20\)"),
        ((0, 10, 10, 20, 10), "outside"),
        ((0, 10, 10, 19, 9), "distinct offsets"),
        ((2, 1, 0, 0, 1), "not in the plan"),
    ],
)
def test_mismatches_are_refused(part, match):
    with pytest.raises(ReportMismatchError, match=match):
        check_report(PLAN, report(part))


def test_report_for_another_batch_is_refused():
    with pytest.raises(ReportMismatchError, match="expected 'p' batch 3"):
        check_report(PLAN, report(batch_id=4))


def test_malformed_report():
    with pytest.raises(ReportMismatchError, match="malformed"):
        parse_report({"format": 1, "pipeline": "p"})
    with pytest.raises(ReportMismatchError, match="format"):
        parse_report({"format": 99})


def test_decode_error_threshold():
    from airflow_kafka_offsets.core.model import DecodeSpec
    from airflow_kafka_offsets.errors import DecodeErrorThresholdError
    from airflow_kafka_offsets.service.jobs import check_decode_errors

    raw = {
        "format": 1,
        "pipeline": "p",
        "batch_id": 3,
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "records": 5,
                "min_offset": 10,
                "max_offset": 14,
                "distinct_offsets": 5,
                "decode_errors": 2,
            }
        ],
    }
    check_decode_errors(PLAN, parse_report(raw), None)
    check_decode_errors(PLAN, parse_report(raw), DecodeSpec("id STRING", None))
    check_decode_errors(PLAN, parse_report(raw), DecodeSpec("id STRING", 2))
    with pytest.raises(DecodeErrorThresholdError, match=r"2 records could not be decoded as JSON \(t-0: 2\)"):
        check_decode_errors(PLAN, parse_report(raw), DecodeSpec("id STRING", 1))
