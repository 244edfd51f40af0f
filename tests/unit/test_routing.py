"""Routing a pipeline's records to many tables: what the spec accepts, refuses, and where a record goes."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.model import PipelineSpec, SinkFormat
from airflow_kafka_offsets.core.routing import HeaderRoute, TableRoutes, rerouting_problems
from airflow_kafka_offsets.core.spec import build_spec, updated_spec
from airflow_kafka_offsets.core.spec_diff import change_refusals, diff_specs
from airflow_kafka_offsets.errors import InvalidPipelineSpecError

ROUTE = {"pattern": "cdc.{header:table}", "allow": ["cdc.orders", "cdc.users"], "unknown": "errors"}


def multi(topics: list[str], **sink: object) -> PipelineSpec:
    return build_spec("p", topics, "/lake", sink={"format": "iceberg", **sink})


def test_a_topic_map_is_stored_in_the_spec_and_read_back():
    spec = multi(["a", "b"], tables={"a": "ns.a", "b": "ns.b"})
    assert spec.sink.routes == TableRoutes((("a", "ns.a"), ("b", "ns.b")))
    assert spec.sink.to_json()["tables"] == {"a": "ns.a", "b": "ns.b"}
    assert PipelineSpec.from_json(spec.to_json()) == spec
    assert spec.sink.routes.tables == ("ns.a", "ns.b")


def test_a_header_route_is_stored_in_the_spec_and_read_back():
    spec = multi(["cdc"], route=ROUTE)
    assert spec.sink.routes.header == HeaderRoute("table", "cdc.", "", ("cdc.orders", "cdc.users"), "errors")
    assert spec.sink.to_json()["route"] == ROUTE
    assert PipelineSpec.from_json(spec.to_json()) == spec


def test_iceberg_tables_of_many_may_live_in_another_catalog():
    spec = multi(["a", "b"], tables={"a": "ns.a", "b": "ns.b"}, catalog_conn_id="lake")
    assert (spec.sink.catalog_conn_id, spec.sink.routes.tables) == ("lake", ("ns.a", "ns.b"))


def test_two_topics_may_share_a_table():
    assert multi(["a", "b"], tables={"a": "ns.t", "b": "ns.t"}).sink.routes.tables == ("ns.t",)


@pytest.mark.parametrize(
    ("sink", "message"),
    [
        ({"tables": {"zzz": "ns.a"}}, "tables routes topic 'zzz', which the pipeline does not read"),
        ({"tables": {"a": "ns.a"}}, r"topic\(s\) b have no table: add them to tables, or give a route by header"),
        ({"tables": {"a": "ns.a", "b": "bad-name"}}, "the table of topic 'b' 'bad-name' is not a table name"),
        ({"tables": {"a": "ns.a", "b": "plain"}}, "'plain' needs a namespace for Iceberg"),
        ({"tables": {"a": "ns.T", "b": "ns.t"}}, "names tables 'ns.T' and 'ns.t', which differ only in case"),
        ({"tables": ["a"]}, "tables must map each topic to its table"),
        ({"tables": {"a": "ns.a", "b": "ns.b"}, "table": "ns.c"}, "a sink of many tables .* takes no table"),
        ({"tables": {"a": "ns.a", "b": "ns.b"}, "partition_by": "day"}, "takes no partition_by"),
        ({"format": "delta", "tables": {"a": "a", "b": "b"}, "catalog_conn_id": "c"}, "applies to the iceberg sink"),
        ({"route": {**ROUTE, "pattern": "cdc.table"}}, "must hold exactly one '{header:<name>}'"),
        ({"route": {**ROUTE, "pattern": "{header:a}.{header:b}"}}, "must hold exactly one"),
        ({"route": {**ROUTE, "header": "other"}}, "route header 'other' differs from the pattern's 'table'"),
        ({"route": {**ROUTE, "allow": []}}, "a header route needs allow"),
        ({"route": {**ROUTE, "allow": "cdc.orders"}}, "a header route needs allow"),
        ({"route": {**ROUTE, "allow": ["other.orders"]}}, "'other.orders' does not match the route pattern"),
        ({"route": {**ROUTE, "allow": ["cdc.orders", "cdc.orders"]}}, "route allow names table 'cdc.orders' twice"),
        ({"route": {**ROUTE, "allow": ["cdc.a-b"]}}, "allowed table 'cdc.a-b' is not a table name"),
        ({"route": {**ROUTE, "unknown": "drop"}}, r"fallback table \(route unknown\) 'drop' needs a namespace"),
        ({"route": {**ROUTE, "unknown": ""}}, "route unknown must be 'errors', 'refuse' or a table"),
        ({"route": {**ROUTE, "when": "x"}}, r"unknown route option\(s\) when"),
        ({"route": "cdc.{header:table}"}, "route must be a mapping"),
    ],
)
def test_bad_routing_is_refused_with_what_is_wrong(sink: dict, message: str):
    with pytest.raises(InvalidPipelineSpecError, match=message):
        multi(["a", "b"], **sink)


def test_the_directory_sink_takes_no_routes():
    with pytest.raises(InvalidPipelineSpecError, match="tables and route need the iceberg or delta sink"):
        build_spec("p", ["a"], "/lake", sink={"format": "directory", "tables": {"a": "ns.a"}})


def test_delta_tables_need_no_namespace():
    spec = build_spec("p", ["a"], "/lake", sink={"format": "delta", "tables": {"a": "orders"}})
    assert spec.sink.format is SinkFormat.DELTA and spec.sink.routes.tables == ("orders",)


def test_a_record_goes_to_its_topics_table_else_to_the_table_its_header_names_if_allowed():
    routes = multi(["mapped", "cdc"], tables={"mapped": "ns.m"}, route=ROUTE).sink.routes
    assert routes.table_for("mapped", "orders") == "ns.m"
    assert routes.table_for("cdc", "orders") == "cdc.orders"
    assert routes.table_for("cdc", "payments") is None  # not allowed: the errors output
    assert routes.table_for("cdc", None) is None  # no header
    fallback = multi(["cdc"], route={**ROUTE, "unknown": "cdc.unrouted"}).sink.routes
    assert fallback.table_for("cdc", "payments") == "cdc.unrouted"
    assert fallback.tables == ("cdc.orders", "cdc.unrouted", "cdc.users")


def test_the_spark_job_gets_the_same_rule():
    routes = multi(
        ["mapped", "cdc"],
        tables={"mapped": "ns.m"},
        route={**ROUTE, "pattern": "cdc.{header:t}_v1", "allow": ["cdc.orders_v1"]},
    ).sink.routes
    assert routes.job_json() == {
        "topics": {"mapped": "ns.m"},
        "header": "t",
        "prefix": "cdc.",
        "suffix": "_v1",
        "allow": ["cdc.orders_v1"],
        "fallback": None,
    }


def test_change_spec_may_add_a_topic_and_its_table():
    stored = multi(["a"], tables={"a": "ns.a"})
    wider = updated_spec(
        stored, {"topics": ["a", "b"], "sink": {"format": "iceberg", "tables": {"a": "ns.a", "b": "ns.b"}}}
    )
    assert change_refusals(diff_specs(stored, wider), None, committed_topics=["a"]) == ()


def test_change_spec_may_not_reroute_a_topic_with_committed_data():
    stored = multi(["a"], tables={"a": "ns.a"})
    moved = updated_spec(stored, {"sink": {"format": "iceberg", "tables": {"a": "ns.other"}}})
    assert change_refusals(diff_specs(stored, moved), None, committed_topics=["a"]) == (
        "the sink's routes: topic 'a' has committed data in 'ns.a'; it cannot be rerouted to ns.other",
    )
    assert change_refusals(diff_specs(stored, moved), None, committed_topics=[]) == ()  # nothing landed yet


def test_a_header_route_may_only_gain_allowed_tables():
    stored = multi(["cdc"], route=ROUTE).sink.routes
    more = multi(["cdc"], route={**ROUTE, "allow": [*ROUTE["allow"], "cdc.items"]}).sink.routes
    fewer = multi(["cdc"], route={**ROUTE, "allow": ["cdc.orders"]}).sink.routes
    refusing = multi(["cdc"], route={**ROUTE, "unknown": "refuse"}).sink.routes
    assert rerouting_problems(stored, more, ["cdc"]) == []
    assert rerouting_problems(stored, fewer, ["cdc"]) == [
        "allowed table(s) cdc.users cannot be removed from the header route"
    ]
    assert rerouting_problems(stored, refusing, ["cdc"]) == [
        "the header route 'cdc.{header:table}' can only gain allowed tables"
    ]


def test_a_single_table_sink_never_becomes_a_sink_of_many():
    stored = build_spec("p", ["a"], "/lake", sink={"format": "iceberg", "table": "ns.a"})
    many = multi(["a"], tables={"a": "ns.a"})
    (refusal,) = change_refusals(diff_specs(stored, many), None)
    assert refusal.startswith("the sink cannot change")


def test_records_without_a_route_fail_the_batch_only_when_the_route_refuses_them():
    from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, PartitionRange
    from airflow_kafka_offsets.errors import UnroutableRecordsError
    from airflow_kafka_offsets.service.jobs import build_job, check_routing

    plan = BatchPlan("p", 3, 0, (PartitionRange("cdc", 0, 0, 10, 0),), "file:///lake")
    raw = {"routing": {"tables": {"cdc.orders": 8}, "unrouted": 2, "unrouted_values": ["payments", None]}}
    report = BatchReport("p", 3, (), 0, "4.2.0", raw=raw)
    check_routing(plan, report, multi(["cdc"], route=ROUTE).sink.routes)  # "errors": the errors output has them
    refusing = multi(["cdc"], route={**ROUTE, "unknown": "refuse"}).sink
    with pytest.raises(UnroutableRecordsError, match=r"2 records have no table \(header 'table' values: 'payments', "):
        check_routing(plan, report, refusing.routes)
    assert build_job(plan, "a1", "file:///s", {}, sink=refusing)["routing"] == refusing.routes.job_json()
