"""Approved abort and change-spec against the real ledger and Kafka (the browser test covers reset).

An approval is the digest of a dry run's table; the operation recomputes the table in the
transaction that applies it and refuses, with nothing changed, when it differs. No Spark runs.
"""

from __future__ import annotations

from dataclasses import replace

from airflow_kafka_offsets.core.operation_fields import parse_request
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import ApprovalMismatchError
from airflow_kafka_offsets.service.approval import ApprovalCheck, preview
from airflow_kafka_offsets.service.operations import run_operation

from .helpers import ledger_ranges, produce, refused
from .pipeline import operation_context, plan


def test_an_approved_abort_aborts_the_batch_shown_and_a_stale_approval_refuses(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    spec = build_spec("approved_abort", [topic], str(tmp_path))
    produce(stack.bootstrap_servers, topic, 6, partitions=2)
    first = plan(ledger, spec, stack).plan
    assert first is not None
    request = parse_request({"operation": "abort", "pipeline": spec.name, "abort_reason": "approved"})
    ctx = operation_context(ledger, stack)
    shown = preview(request, ctx)
    assert shown.table.splitlines()[2:] == [
        f"1      {topic}-0  [0, 3)  planned  aborted",
        f"1      {topic}-1  [0, 3)  planned  aborted",
    ]
    approved = ApprovalCheck(shown.digest)
    assert run_operation(request, replace(ctx, approval=approved)).data == {"aborted": 1, "reason": "approved"}
    # the same approval once another batch is planned: the abort would hit batch 2, not the batch 1 shown
    produce(stack.bootstrap_servers, topic, 2, partitions=2)
    second = plan(ledger, spec, stack).plan
    assert second is not None and second.batch_id == 2
    before = ledger_ranges(ledger, spec.name)
    with refused(ApprovalMismatchError, "abort of pipeline 'approved_abort' refused, nothing changed"):
        run_operation(request, replace(ctx, approval=approved))
    assert ledger_ranges(ledger, spec.name) == before
    assert [r[:2] for r in before] == [(1, "aborted"), (1, "aborted"), (2, "planned"), (2, "planned")]


def test_an_approved_change_spec_applies_and_a_changed_spec_refuses(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    spec = build_spec("approved_spec", [topic], str(tmp_path))
    with ledger.transaction() as tx:
        tx.lock_pipeline(spec)
    ctx = operation_context(ledger, stack)
    cap_10 = parse_request(
        {"operation": "change_spec", "pipeline": spec.name, "spec_max_records_per_batch": 10, "dry_run": False}
    )
    cap_20 = parse_request({**cap_10.values, "operation": "change_spec", "spec_max_records_per_batch": 20})
    approved_10 = ApprovalCheck(preview(cap_10, ctx).digest)
    with refused(ApprovalMismatchError, "change_spec of pipeline 'approved_spec' refused"):
        run_operation(cap_20, replace(ctx, approval=approved_10))  # not what was approved
    with ledger.transaction() as tx:
        assert tx.pipeline_spec(spec.name).max_records_per_batch is None
    assert run_operation(cap_10, replace(ctx, approval=approved_10)).data["applied"] is True
    with ledger.transaction() as tx:
        assert tx.pipeline_spec(spec.name).max_records_per_batch == 10
