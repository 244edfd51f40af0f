"""Approvals of destructive operations: what an approval is bound to, and the question it asks (pure)."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.core.operation_fields import parse_request
from airflow_kafka_offsets.core.tables import abort_table, render_table
from airflow_kafka_offsets.errors import ApprovalMismatchError
from airflow_kafka_offsets.operators.approval import approval_body, markdown_table
from airflow_kafka_offsets.service.approval import ApprovalCheck, digest, needs_approval

TABLE = render_table(["partition", "before", "after", "change"], [["orders-0", 5, 8, "skip 3"], ["orders-1", 7, 7, ""]])


def test_an_approval_holds_for_the_same_table_only():
    check = ApprovalCheck(digest("reset", "orders", TABLE))
    check.check("reset", "orders", TABLE)
    with pytest.raises(ApprovalMismatchError, match="reset of pipeline 'orders' refused, nothing changed") as exc:
        check.check("reset", "orders", TABLE.replace("8", "9"))
    assert "orders-0        5      9  skip 3" in str(exc.value)  # what it would do now
    for other in (("abort", "orders", TABLE), ("reset", "payments", TABLE)):
        with pytest.raises(ApprovalMismatchError):
            check.check(*other)


@pytest.mark.parametrize(
    ("fields", "needed"),
    [
        ({"operation": "reset", "reset_mode": "to-latest", "dry_run": False}, True),
        ({"operation": "reset", "reset_mode": "to-latest", "dry_run": True}, False),
        ({"operation": "abort"}, True),
        ({"operation": "change_spec", "spec_max_records_per_batch": 10, "dry_run": False}, True),
        ({"operation": "change_spec", "spec_max_records_per_batch": 10, "dry_run": True}, False),
        ({"operation": "status"}, False),
        ({"operation": "sweep", "dry_run": False}, False),
    ],
)
def test_only_operations_that_change_the_ledger_for_good_need_an_approval(fields, needed):
    assert needs_approval(parse_request({"pipeline": "orders", **fields})) is needed


def test_the_question_shows_the_dry_run_as_a_markdown_table_with_empty_cells():
    assert markdown_table(TABLE) == (
        "| partition | before | after | change |\n|---|---|---|---|\n"
        "| orders-0 | 5 | 8 | skip 3 |\n| orders-1 | 7 | 7 |  |"
    )
    body = approval_body("reset", TABLE, "ab" * 32)
    assert "**reset**" in body and "Dry run digest: `abababababababab`" in body


def test_an_aborts_table_lists_the_planned_batchs_ranges():
    plan = BatchPlan("orders", 4, 0, (PartitionRange("orders", 0, 5, 8, 5), PartitionRange("orders", 1, 7, 9, 7)), "u")
    assert markdown_table(abort_table(plan)).splitlines()[2:] == [
        "| 4 | orders-0 | [5, 8) | planned | aborted |",
        "| 4 | orders-1 | [7, 9) | planned | aborted |",
    ]
