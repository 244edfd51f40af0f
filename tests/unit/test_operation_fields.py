"""The manual operations' field definitions: one set of rules for the form, the operator and the CLI."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import jsonschema
import pytest

from airflow_kafka_offsets.cli import build_parser, request_from_args
from airflow_kafka_offsets.core.model import TopicPartition as TP
from airflow_kafka_offsets.core.operation_fields import (
    FIELDS,
    FIELDS_BY_NAME,
    OPERATION_NAMES,
    OperationInputError,
    form_fields,
    parse_request,
    reset_request,
    spec_changes,
)
from airflow_kafka_offsets.core.resets import ResetMode, ResetRequest
from airflow_kafka_offsets.core.spec import build_spec, updated_spec
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.service.operations import HANDLERS

FORM_DEFAULTS = {f.name: f.default for f in form_fields()}


def form_schema() -> dict:
    """The JSON schema the trigger form validates against (what Airflow builds from the Params)."""
    properties = {}
    for field in form_fields():
        kwargs = field.param_kwargs()
        properties[field.name] = {
            k: v for k, v in kwargs.items() if k not in ("default", "title", "description", "section")
        }
    return {"type": "object", "properties": properties}


def form_accepts(**values) -> bool:
    try:
        jsonschema.validate({**FORM_DEFAULTS, **values}, form_schema())
    except jsonschema.ValidationError:
        return False
    return True


def test_every_operation_has_a_handler_and_the_defaults_run_status():
    assert set(HANDLERS) == set(OPERATION_NAMES)
    request = parse_request(FORM_DEFAULTS)
    assert (request.operation, request.pipeline) == ("status", "demo_events")


def test_only_operation_and_pipeline_are_required_in_the_form():
    required = [f.name for f in form_fields() if "null" not in f.param_kwargs()["type"]]
    assert required == ["operation", "pipeline"]
    assert all(FIELDS_BY_NAME[name].default is not None for name in required)
    assert form_accepts()
    assert form_accepts(**{f.name: None for f in form_fields() if f.name not in required})


@pytest.mark.parametrize("blank", [None, "", "   ", "\t"])
def test_blank_means_every_topic_and_partition_and_defaults(blank):
    for operation in OPERATION_NAMES:
        raw = {**{f.name: blank for f in FIELDS}, "operation": operation, "pipeline": "p"}
        if operation == "replay":
            raw["replay_first_batch"] = 1
        request = parse_request(raw)
        assert request.operation == operation
    reset = parse_request(
        {
            "operation": "reset",
            "pipeline": "p",
            "reset_mode": blank,
            "reset_value": blank,
            "reset_topic": blank,
            "reset_partitions": blank,
            "dry_run": blank,
        }
    )
    assert reset_request(reset.values) == ResetRequest(ResetMode.TO_LATEST, None, None, None, None)
    assert reset.get("dry_run") is True
    catch = parse_request({"operation": "catch_up", "pipeline": "p", "catch_up_max_batches": blank})
    assert catch.get("catch_up_max_batches") == 10
    abort = parse_request({"operation": "abort", "pipeline": "p", "abort_reason": blank})
    assert abort.get("abort_reason") == "aborted by hand"
    assert form_accepts(reset_topic=blank, reset_partitions=blank, replay_offset_ranges=blank)


def test_fields_of_other_operations_never_block():
    garbage = {f.name: "garbage" for f in FIELDS if f.name not in ("operation", "pipeline")}
    assert parse_request({**garbage, "operation": "status", "pipeline": "p"}).values == {
        "pipeline": "p",
        "operation": "status",
    }


def test_parsed_values():
    reset = parse_request(
        {
            "operation": "reset",
            "pipeline": "p",
            "reset_mode": "shift-by",
            "reset_value": " -5 ",
            "reset_topic": " orders ",
            "reset_partitions": " 2, 0 ,2",
            "dry_run": "false",
        }
    )
    assert reset_request(reset.values) == ResetRequest(ResetMode.SHIFT_BY, -5, None, "orders", (0, 2))
    assert reset.get("dry_run") is False
    at = parse_request(
        {"operation": "reset", "pipeline": "p", "reset_mode": "to-datetime", "reset_value": "2026-11-21T08:00"}
    )
    assert reset_request(at.values).timestamp == datetime(2026, 11, 21, 8, tzinfo=UTC)
    replay = parse_request(
        {"operation": "replay", "pipeline": "p", "replay_offset_ranges": " a:0:5-9 ,  my.topic:12:0-1 "}
    )
    assert replay.get("replay_offset_ranges") == ((TP("a", 0), 5, 9), (TP("my.topic", 12), 0, 1))


BAD = [
    ({"operation": "explode"}, "Operation: operation must be one of status, replay, reset, catch_up, abort"),
    ({"operation": "status", "pipeline": "../etc"}, "Pipeline: '../etc' is not a pipeline name"),
    ({"operation": "replay"}, "give exactly one of batch numbers, offset ranges or a since time (none given)"),
    ({"operation": "replay", "replay_first_batch": 1, "replay_since": "2026-01-01"}, "(several given)"),
    ({"operation": "replay", "replay_first_batch": 0}, "Replay: first batch: must be at least 1, got 0"),
    (
        {"operation": "replay", "replay_first_batch": 5, "replay_last_batch": 3},
        "Replay: last batch (3) is before the first batch (5)",
    ),
    (
        {"operation": "replay", "replay_offset_ranges": "garbage"},
        "Replay: offset ranges: 'garbage' is not an offset range: use topic:partition:start-end, e.g. orders:0:100-200",
    ),
    ({"operation": "replay", "replay_offset_ranges": "a:0:9-5"}, "offset range 'a:0:9-5' is empty"),
    ({"operation": "replay", "replay_since": "yesterday"}, "Replay: since: 'yesterday' is not a timestamp: use ISO"),
    ({"operation": "replay", "replay_until": "2026-01-01"}, "Replay: until needs a since"),
    (
        {"operation": "replay", "replay_since": "2026-01-02", "replay_until": "2026-01-01"},
        "Replay: until must be after since",
    ),
    ({"operation": "reset", "reset_mode": "to-somewhere"}, "Reset: mode: 'to-somewhere' is not a reset mode"),
    ({"operation": "reset", "reset_mode": "to-offset"}, "Reset: value: to-offset needs a whole number, e.g. 42"),
    (
        {"operation": "reset", "reset_mode": "to-offset", "reset_value": "x"},
        "Reset: value: expected a whole number such as 42, got 'x'",
    ),
    ({"operation": "reset", "reset_mode": "to-offset", "reset_value": "-1"}, "Reset: value: must be at least 0"),
    ({"operation": "reset", "reset_mode": "to-datetime"}, "Reset: value: to-datetime needs a timestamp"),
    ({"operation": "reset", "reset_mode": "to-datetime", "reset_value": "soon"}, "'soon' is not a timestamp"),
    ({"operation": "reset", "reset_topic": "a b"}, "Reset: topic: 'a b' is not a Kafka topic name"),
    (
        {"operation": "reset", "reset_partitions": "1;2"},
        "Reset: partitions: '1;2' is not a list of partition numbers: use comma-separated numbers such as 0,2, or"
        " leave it empty for every partition",
    ),
    ({"operation": "reset", "reset_partitions": "-1"}, "'-1' is not a list of partition numbers"),
    ({"operation": "reset", "dry_run": "maybe"}, "Dry run: expected true or false, got 'maybe'"),
    ({"operation": "catch_up", "catch_up_max_batches": 0}, "Catch-up: at most this many batches: must be at least 1"),
    ({"operation": "catch_up", "catch_up_max_batches": "lots"}, "expected a whole number such as 10, got 'lots'"),
]


@pytest.mark.parametrize("raw,message", BAD)
def test_bad_values_are_refused_with_a_message_naming_the_field(raw, message):
    with pytest.raises(OperationInputError, match=re.escape(message)):
        parse_request({"pipeline": "p", **raw})


FORM_BAD = {
    "operation": "explode",
    "pipeline": "../etc",
    "replay_first_batch": 0,
    "replay_offset_ranges": "garbage",
    "replay_since": "yesterday",
    "reset_mode": "to-somewhere",
    "reset_value": "abc",
    "reset_topic": "a b",
    "reset_partitions": "1;2",
    "catch_up_max_batches": 0,
}


@pytest.mark.parametrize("name,value", FORM_BAD.items())
def test_the_form_schema_refuses_what_its_pattern_can_express(name, value):
    assert not form_accepts(**{name: value})


def test_form_schema_accepts_what_the_parser_accepts():
    assert form_accepts(
        replay_offset_ranges=" a:0:5-9 ,  my.topic:12:0-1 ",
        reset_partitions=" 0, 2 ",
        reset_value="-5",
        replay_since="2026-11-21T08:00:00Z",
        reset_topic="orders",
    )
    assert form_accepts(reset_value="2026-11-21 08:00+01:00")


def cli(*argv: str):
    return request_from_args(build_parser().parse_args(list(argv)))


def test_cli_uses_the_same_rules_and_names_its_options():
    reset = cli("reset", "p", "--to-offset", "7", "--partitions", " ", "--execute")
    assert reset_request(reset.values) == ResetRequest(ResetMode.TO_OFFSET, 7, None, None, None)
    assert reset.get("dry_run") is False
    assert cli("reset", "p", "--to-earliest").get("dry_run") is True
    assert cli("replay", "p", "--batches", "3-5").values["replay_last_batch"] == 5
    with pytest.raises(
        OperationInputError,
        match=re.escape("--batches: expected FIRST or FIRST-LAST batch numbers, e.g. 3 or 3-5; got 'two'"),
    ):
        cli("replay", "p", "--batches", "two")
    with pytest.raises(OperationInputError, match=re.escape("--to-offset: expected a whole number such as 42")):
        cli("reset", "p", "--to-offset", "x")
    with pytest.raises(OperationInputError, match=re.escape("--partitions: '1;2' is not a list")):
        cli("reset", "p", "--to-latest", "--partitions", "1;2")
    assert cli("catch-up", "p").get("catch_up_max_batches") == 10


def test_the_operator_has_its_own_spark_settings_and_templated_connection_ids():
    from airflow_kafka_offsets.operators import KafkaBatchSparkOperator, KafkaPipelineOperationOperator

    assert not issubclass(KafkaPipelineOperationOperator, KafkaBatchSparkOperator)
    assert {"kafka_conn_id", "postgres_conn_id", "spark_conn_id", "operation", "options", "pipeline"} <= set(
        KafkaPipelineOperationOperator.template_fields
    )
    op = KafkaPipelineOperationOperator(
        task_id="t",
        operation="replay",
        pipeline="p",
        spark_conn_id="spark_x",
        spark_jars="/a.jar,/b.jar",
        executor_memory="2g",
    )
    assert (op.spark_conn_id, op.spark_jars, op.executor_memory) == (
        "spark_x",
        "/a.jar,/b.jar",
        "2g",
    )


def test_change_spec_and_sweep_from_the_cli_and_the_form():
    request = cli(
        "change-spec",
        "p",
        "--topics",
        "orders, refunds,orders",
        "--max-records-per-batch",
        "none",
        "--max-records-per-partition",
        "500",
        "--on-data-loss",
        "skip",
    )
    assert request.get("dry_run") is True
    assert spec_changes(request.values) == {
        "topics": ("orders", "refunds"),
        "max_records_per_batch": None,
        "max_records_per_partition": 500,
        "on_data_loss": "skip",
    }
    assert spec_changes(cli("change-spec", "p", "--execute").values) == {}
    assert cli("sweep", "p", "--execute").get("dry_run") is False and cli("sweep", "p").get("dry_run") is True
    with pytest.raises(OperationInputError, match=re.escape("--max-records-per-batch: must be at least 1, got 0")):
        cli("change-spec", "p", "--max-records-per-batch", "0")
    with pytest.raises(OperationInputError, match=re.escape("--on-data-loss: expected one of fail, skip, got 'drop'")):
        cli("change-spec", "p", "--on-data-loss", "drop")
    with pytest.raises(OperationInputError, match=re.escape("--topics: 'bad topic' is not a Kafka topic name")):
        cli("change-spec", "p", "--topics", "orders,bad topic")
    assert form_accepts(operation="change_spec", spec_topics="a, b.c", spec_max_records_per_batch="None")
    assert not form_accepts(spec_max_records_per_batch="0") and not form_accepts(spec_topics="a;b")


def test_updated_spec_keeps_what_is_not_changed_and_validates_the_rest():
    stored = build_spec(
        "p",
        ["orders"],
        "/out",
        max_records_per_batch=100,
        on_data_loss="skip",
        json_schema="id STRING",
        max_decode_errors=3,
    )
    new = updated_spec(stored, {"topics": ("orders", "refunds"), "max_records_per_batch": None})
    assert (new.topics, new.max_records_per_batch, new.on_data_loss.value) == (("orders", "refunds"), None, "skip")
    assert new.decode == stored.decode and new.output_root == stored.output_root
    assert updated_spec(stored, {}) == stored
    with pytest.raises(InvalidPipelineSpecError, match="unknown spec field"):
        updated_spec(stored, {"output_root": "/elsewhere"})
    with pytest.raises(InvalidPipelineSpecError, match="max_records_per_partition must be a positive integer"):
        updated_spec(stored, {"max_records_per_partition": -1})
