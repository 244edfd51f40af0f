"""A pipeline's spec changes only on purpose: a run with another spec is refused; change_spec applies it.

Real Kafka and PostgreSQL; one Spark read (the batch that first reads an added topic).
"""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import PipelineSpecMismatchError, SpecChangeRefusedError, UnknownTopicError
from airflow_kafka_offsets.operators import KafkaBatchPlanOperator
from airflow_kafka_offsets.service.operations.abort import abort_planned_batch
from airflow_kafka_offsets.service.operations.change_spec import change_spec

from .helpers import assert_exactly_once, committed_rows, ledger_ranges, produce, refused
from .pipeline import commit, operation_context, plan, read, run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

LEDGER_TABLES = ("pipelines", "cursors", "batches", "batch_ranges", "attempts", "audit")


def ledger_state(ledger) -> dict[str, list[str]]:
    with ledger.transaction() as tx:
        return {
            t: sorted(r[0] for r in tx.fetchall(f"SELECT row_to_json(x)::text FROM {{s}}.{t} x")) for t in LEDGER_TABLES
        }


def stored_spec(ledger, pipeline: str):
    with ledger.transaction() as tx:
        return tx.pipeline_spec(pipeline)


def test_a_run_with_other_topics_or_options_is_refused_listing_the_differences(
    stack, ledger, schema, make_topic, tmp_path
):
    ours, other = make_topic(partitions=1), make_topic(partitions=1)
    produce(stack.bootstrap_servers, ours, 10, partitions=1)
    produce(stack.bootstrap_servers, other, 10, partitions=1)
    spec = build_spec("shared", [ours], str(tmp_path), max_records_per_batch=4)
    first = plan(ledger, spec, stack).plan
    assert [(r.topic, r.start, r.end) for r in first.ranges] == [(ours, 0, 4)]
    before = ledger_state(ledger)

    # another DAG reuses the name with another topic: refused, its records never enter our batches
    with pytest.raises(PipelineSpecMismatchError) as err:
        plan(ledger, build_spec("shared", [ours, other], str(tmp_path), max_records_per_batch=4), stack)
    assert f"  topics: [{ours}] -> [{', '.join(sorted([ours, other]))}] (adds {other})\n" in str(err.value)
    assert "'change-spec' operation" in str(err.value)
    # ... or with other options (the cap that became null): refused too, nothing flips
    with pytest.raises(PipelineSpecMismatchError, match=r"\n  max_records_per_batch: 4 -> null\n"):
        plan(ledger, build_spec("shared", [ours], str(tmp_path)), stack)
    # the plan operator of a DAG refuses the same way
    operator = KafkaBatchPlanOperator(
        task_id="plan",
        pipeline="shared",
        topics=[ours],
        output_root=str(tmp_path),
        ledger_schema=schema,
        max_records_per_batch="7",
    )
    with refused(PipelineSpecMismatchError, match=r"max_records_per_batch: 4 -> 7"):
        operator.execute({})
    assert ledger_state(ledger) == before
    assert stored_spec(ledger, "shared") == spec
    # the stored spec still plans (replays) as before
    assert plan(ledger, spec, stack).plan == first


def test_change_spec_adds_and_removes_topics_and_options_with_every_offset_accounted_for(
    stack, ledger, make_topic, tmp_path
):
    a, b = make_topic(partitions=2), make_topic(partitions=1)
    ctx = operation_context(ledger, stack)
    produce(stack.bootstrap_servers, a, 4, partitions=2)
    spec = build_spec("grows", [a], str(tmp_path), starting_offsets="latest")
    first = plan(ledger, spec, stack).plan  # starts at the end: cursors only, no Spark
    commit(ledger, spec, first.batch_id)
    produced_a = produce(stack.bootstrap_servers, a, 4, partitions=2, tag="a")
    produced_b = produce(stack.bootstrap_servers, b, 3, partitions=1, tag="b")

    # adding a topic: dry run first (nothing changes), then applied and audited
    with_b = build_spec("grows", [a, b], str(tmp_path), starting_offsets="latest")
    before = ledger_state(ledger)
    dry = change_spec(ctx, "grows", with_b)
    assert not dry.applied and ledger_state(ledger) == before
    assert [str(c) for c in dry.changes] == [f"topics: [{a}] -> [{', '.join(sorted([a, b]))}]"]
    assert dry.starts == ((TP(b, 0), 0, "earliest (the next plan fixes it)"),) and dry.retired == ()
    assert change_spec(ctx, "grows", with_b, dry_run=False).applied
    assert stored_spec(ledger, "grows") == with_b

    # the next batch reads the added topic from its policy's start (new_partition_offsets: earliest)
    second = plan(ledger, with_b, stack)
    assert [(r.topic, r.partition, r.start, r.end) for r in second.plan.ranges] == sorted(
        [(a, 0, 2, 4), (a, 1, 2, 4), (b, 0, 0, 3)]
    )
    # removing a topic waits for the planned batch
    only_a = build_spec("grows", [a], str(tmp_path), starting_offsets="latest")
    with pytest.raises(SpecChangeRefusedError, match=f"batch 2 is planned and reads {b}"):
        change_spec(ctx, "grows", only_a, dry_run=False)
    read(ledger, with_b, stack, second)
    commit(ledger, with_b, 2)
    assert_exactly_once(committed_rows(ledger, "grows"), produced_a + produced_b)

    # removing it retires its cursor (kept, recorded); its new records are no longer planned
    removed = change_spec(ctx, "grows", only_a, dry_run=False)
    assert removed.applied and removed.retired == ((TP(b, 0), 3),)
    with ledger.transaction() as tx:
        event, detail = tx.fetchone(
            "SELECT event, detail FROM {s}.audit WHERE pipeline = 'grows'"
            " AND event = 'spec_changed' ORDER BY id DESC LIMIT 1"
        )
    assert event == "spec_changed" and detail["removed_topics"] == [b]
    assert detail["retired_cursors"] == {f"{b}-0": 3}
    assert ledger.cursors("grows")[TP(b, 0)] == 3
    produce(stack.bootstrap_servers, b, 2, partitions=1)
    assert plan(ledger, only_a, stack).plan is None  # b has 2 new records, but b is not part of it now
    with pytest.raises(PipelineSpecMismatchError, match=rf"topics: \[{a}\] -> \[.*\] \(adds {b}\)"):
        plan(ledger, with_b, stack)  # the DAG that still lists b is refused

    # re-adding resumes from the retired cursor; an option change applies to the next batch
    capped = build_spec("grows", [a, b], str(tmp_path), starting_offsets="latest", max_records_per_batch=1)
    readd = change_spec(ctx, "grows", capped, dry_run=False)
    assert readd.starts == ((TP(b, 0), 3, "resumes its retired cursor"),)
    third = plan(ledger, capped, stack).plan
    assert [(r.topic, r.partition, r.cursor, r.start, r.end) for r in third.readable_ranges] == [(b, 0, 3, 3, 4)]
    abort_planned_batch(ctx, "grows", "test")
    assert ledger.contiguity_problems("grows") == []
    assert [(r[0], r[1], r[2], r[3], r[5], r[6]) for r in ledger_ranges(ledger, "grows")] == sorted(
        [
            (1, "committed", a, 0, 2, 2),
            (1, "committed", a, 1, 2, 2),
            (2, "committed", a, 0, 2, 4),
            (2, "committed", a, 1, 2, 4),
            (2, "committed", b, 0, 0, 3),
            (3, "aborted", a, 0, 4, 4),
            (3, "aborted", a, 1, 4, 4),
            (3, "aborted", b, 0, 3, 4),
        ]
    )


def test_change_spec_refuses_an_unknown_topic_another_root_or_name_and_changes_nothing(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1)
    ctx = operation_context(ledger, stack)
    spec = build_spec("fixed", [topic], str(tmp_path), starting_offsets="latest")
    plan(ledger, spec, stack)
    before = ledger_state(ledger)
    with pytest.raises(UnknownTopicError, match="no-such-topic"):
        change_spec(ctx, "fixed", build_spec("fixed", [topic, "no-such-topic"], str(tmp_path)), dry_run=False)
    with pytest.raises(SpecChangeRefusedError, match="output_root cannot change"):
        change_spec(
            ctx, "fixed", build_spec("fixed", [topic], str(tmp_path / "x"), starting_offsets="latest"), dry_run=False
        )
    with pytest.raises(SpecChangeRefusedError, match="a pipeline's name never changes"):
        change_spec(ctx, "fixed", build_spec("renamed", [topic], str(tmp_path)), dry_run=False)
    # options may change while a batch is planned: they apply from the next batch
    assert change_spec(
        ctx,
        "fixed",
        build_spec("fixed", [topic], str(tmp_path), starting_offsets="latest", on_data_loss="skip"),
        dry_run=False,
    ).applied
    after = ledger_state(ledger)
    assert after["batches"] == before["batches"] and after["cursors"] == before["cursors"]


def test_change_spec_from_the_cli_dry_run_then_execute(stack, ledger, schema, make_topic, tmp_path):
    from .test_operations import cli_json, run_cli

    first, second = make_topic(partitions=1), make_topic(partitions=2)
    produce(stack.bootstrap_servers, first, 4, partitions=1)
    produce(stack.bootstrap_servers, second, 6, partitions=2)
    spec = build_spec("clispec", [first], str(tmp_path / "out"), max_records_per_batch=100)
    run_once(ledger, spec, stack)
    before = ledger_state(ledger)
    common = ("clispec", "--ledger-schema", schema)
    args = ("--topics", f"{first},{second}", "--max-records-per-batch", "none", "--on-data-loss", "skip")

    dry = cli_json("change-spec", *common, *args)
    assert dry["applied"] is False and dry["dry_run"] is True
    assert {c["field"] for c in dry["changes"]} == {"topics", "max_records_per_batch", "on_data_loss"}
    assert [(p["topic"], p["partition"], p["starts_at"]) for p in dry["added_partitions"]] == [
        (second, 0, 0),
        (second, 1, 0),
    ]
    assert ledger_state(ledger) == before

    done = cli_json("change-spec", *common, *args, "--execute")
    assert done["applied"] is True
    stored = stored_spec(ledger, "clispec")
    assert (set(stored.topics), stored.max_records_per_batch, stored.on_data_loss.value) == (
        {first, second},
        None,
        "skip",
    )
    assert ledger.cursors("clispec") == {TP(first, 0): 4}  # the added topic's cursors come with the next plan

    bad = run_cli("change-spec", *common, "--topics", "no-such-topic-here", "--execute")
    assert bad.returncode == 2 and "no-such-topic-here" in bad.stderr
    assert stored_spec(ledger, "clispec") == stored
