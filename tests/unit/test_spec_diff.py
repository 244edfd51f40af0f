"""Spec differences: what a run with another spec is told, and which changes may be applied."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.core.spec_diff import FieldChange, change_refusals, diff_specs, mismatch_message
from airflow_kafka_offsets.errors import InvalidPipelineSpecError


def spec(topics=("a",), **kw):
    kw.setdefault("output_root", "/data/out")
    return build_spec("orders", list(topics), **kw)


def test_equal_specs_have_no_difference():
    diff = diff_specs(spec(max_records_per_batch=5), spec(max_records_per_batch="5"))
    assert not diff and diff.changes == () and diff.lines() == ()


def test_topic_order_is_not_a_difference():
    assert not diff_specs(spec(["a", "b"]), spec(["b", "a"]))


def test_every_changed_field_is_listed_old_to_new():
    before = spec(["a", "b"], max_records_per_batch=100, on_data_loss="fail")
    after = spec(
        ["b", "c"],
        max_records_per_partition=7,
        on_data_loss="skip",
        json_schema="id STRING",
        max_decode_errors=3,
        consumer_group="g",
        new_partition_offsets="latest",
    )
    diff = diff_specs(before, after)
    assert diff.changes == (
        FieldChange("topics", ["a", "b"], ["b", "c"]),
        FieldChange("new_partition_offsets", "earliest", "latest"),
        FieldChange("on_data_loss", "fail", "skip"),
        FieldChange("max_records_per_batch", 100, None),
        FieldChange("max_records_per_partition", None, 7),
        FieldChange("consumer_group", None, "g"),
        FieldChange("decode", None, {"format": "json", "schema": "id STRING", "max_errors": 3}),
    )
    assert diff.added_topics == ("c",) and diff.removed_topics == ("a",)
    assert diff.lines() == (
        "topics: [a, b] -> [b, c] (adds c; removes a)",
        "new_partition_offsets: earliest -> latest",
        "on_data_loss: fail -> skip",
        "max_records_per_batch: 100 -> null",
        "max_records_per_partition: null -> 7",
        "consumer_group: null -> g",
        "decode: null -> format=json, schema=id STRING, max_errors=3",
    )


def test_names_must_match():
    with pytest.raises(InvalidPipelineSpecError, match="a pipeline's name never changes"):
        diff_specs(spec(), build_spec("other", ["a"], "/data/out"))


def test_mismatch_message_lists_the_differences_and_names_the_operation():
    message = mismatch_message(diff_specs(spec(["a"], max_records_per_batch=100), spec(["a", "b"])))
    assert message.startswith("pipeline 'orders' is stored in the ledger with another spec than this run's")
    assert "\n  topics: [a] -> [a, b] (adds b)\n  max_records_per_batch: 100 -> null\n" in message
    assert "Nothing was planned" in message and "'change-spec' operation (dry run first" in message


def test_output_root_never_changes():
    diff = diff_specs(spec(), spec(output_root="/data/elsewhere"))
    (refusal,) = change_refusals(diff, planned_batch=None)
    assert refusal.startswith("output_root cannot change")


@pytest.mark.parametrize(
    ("after", "planned", "refused"),
    [
        (spec(["a", "b"]), 4, ()),  # adding a topic: from the next batch
        (spec(["a"], max_records_per_batch=9, on_data_loss="skip"), 4, ()),  # options: from the next batch
        (spec(["b"]), None, ()),  # removing once nothing is planned
        (spec(["b"]), 4, ("batch 4 is planned and reads a: let it commit (or abort it) before removing a topic",)),
        (
            spec(["a"], json_schema="id STRING"),
            4,
            (
                "batch 4 is planned and will be decoded with the stored json_schema: "
                "let it commit (or abort it) before changing the decoding",
            ),
        ),
        (spec(["a"], json_schema="id STRING"), None, ()),
    ],
)
def test_what_waits_for_a_planned_batch(after, planned, refused):
    assert change_refusals(diff_specs(spec(["a"]), after), planned) == refused
