"""The sink part of a pipeline spec: what users type, what is refused, what the ledger stores."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange, PipelineSpec, SinkFormat, SinkSpec
from airflow_kafka_offsets.core.spec import build_sink, build_spec, updated_spec
from airflow_kafka_offsets.core.spec_diff import change_refusals, diff_specs
from airflow_kafka_offsets.errors import ConfigurationError, InvalidPipelineSpecError
from airflow_kafka_offsets.sinks.base import Publication


@pytest.mark.parametrize("given", [None, "", "  ", "directory", {"format": "directory"}, SinkSpec()])
def test_no_sink_or_directory_means_parquet_directories(given):
    assert build_sink(given, "p") == SinkSpec(SinkFormat.DIRECTORY, None, None)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"format": "iceberg", "table": "lake.orders"}, SinkSpec(SinkFormat.ICEBERG, "lake.orders")),
        ({"format": "delta", "table": "orders"}, SinkSpec(SinkFormat.DELTA, "orders")),
        ({"format": "delta", "table": " lake.orders "}, SinkSpec(SinkFormat.DELTA, "lake.orders")),
        ({"format": "iceberg", "table": "a.b", "partition_by": "day"}, SinkSpec(SinkFormat.ICEBERG, "a.b", "day")),
        ({"format": "delta", "table": "b", "partition_by": ""}, SinkSpec(SinkFormat.DELTA, "b", None)),
        (
            {"format": "iceberg", "table": "a.b", "catalog_conn_id": "cat"},
            SinkSpec(SinkFormat.ICEBERG, "a.b", None, "cat"),
        ),
    ],
)
def test_table_sinks(given, expected):
    assert build_sink(given, "p") == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"format": "parquet"}, "sink format must be one of directory, iceberg, delta; got 'parquet'"),
        ({"format": "iceberg"}, "the iceberg sink needs a table such as 'analytics.events'"),
        ({"format": "iceberg", "table": "orders"}, "an Iceberg table needs a namespace, as in 'analytics.orders'"),
        ({"format": "delta", "table": "../etc"}, "needs a table such as"),
        ({"format": "delta", "table": "a.b.c"}, "needs a table such as"),
        ({"format": "delta", "table": "1abc"}, "needs a table such as"),
        ({"format": "delta", "table": "t", "partition_by": "hour"}, "partition_by must be one of None, day"),
        ({"format": "directory", "table": "t"}, "the directory sink takes no table and no partition_by"),
        ({"format": "directory", "partition_by": "day"}, "the directory sink takes no table and no partition_by"),
        ({"format": "delta", "table": "t", "path": "/x"}, "unknown sink option(s) path"),
        ({"format": "delta", "table": "t", "catalog_conn_id": "c"}, "catalog_conn_id applies to the iceberg sink only"),
    ],
)
def test_bad_sinks_are_refused_naming_what_is_wrong(given, message):
    with pytest.raises(InvalidPipelineSpecError) as info:
        build_sink(given, "p")
    assert message in str(info.value)


def test_the_sink_round_trips_through_the_ledger_and_old_specs_read_as_directory():
    spec = build_spec("p", ["t"], "/lake", sink={"format": "iceberg", "table": "a.b", "partition_by": "day"})
    assert PipelineSpec.from_json(spec.to_json()) == spec
    old = spec.to_json()
    del old["sink"]
    assert PipelineSpec.from_json(old).sink == SinkSpec()


def test_the_sink_never_changes_and_spec_changes_keep_it():
    stored = build_spec("p", ["t"], "/lake", sink={"format": "delta", "table": "b"})
    assert updated_spec(stored, {"max_records_per_batch": 5}).sink == stored.sink
    other = build_spec("p", ["t"], "/lake", sink={"format": "iceberg", "table": "a.b"})
    refusals = change_refusals(diff_specs(stored, other), planned_batch=None)
    assert refusals == (
        "the sink cannot change: committed batches are in the old one; start a new pipeline (another name) "
        "to write to another format or table (a sink of many tables may only gain routes)",
    )


def test_a_table_commit_names_the_batch_its_attempt_and_its_ranges():
    plan = BatchPlan("p", 7, 2, (PartitionRange("t", 0, 10, 20, 10), PartitionRange("t", 1, 5, 5, 5)), "file:///x")
    properties = Publication("uid-1", plan, "a1", "file:///x/a1", 0, None, replay=True).commit_properties()
    assert properties == {
        "kafka-offsets.pipeline": "p",
        "kafka-offsets.pipeline-uid": "uid-1",
        "kafka-offsets.batch": "7",
        "kafka-offsets.epoch": "2",
        "kafka-offsets.attempt": "a1",
        "kafka-offsets.records": "0",
        "kafka-offsets.operation": "replay",
        "kafka-offsets.ranges": '[{"end":20,"partition":0,"start":10,"topic":"t"},'
        '{"end":5,"partition":1,"start":5,"topic":"t"}]',
    }


def test_spark_table_readers_are_picked_by_spark_line_and_missing_ones_are_refused():
    from airflow_kafka_offsets.errors import ConfigurationError
    from airflow_kafka_offsets.spark.versions import table_reader_package

    assert table_reader_package("delta", "4.2.0") == "io.delta:delta-spark_4.2_2.13:4.4.0"
    assert table_reader_package("iceberg", "4.1.1") == "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0"
    with pytest.raises(ConfigurationError) as info:
        table_reader_package("iceberg", "4.2.0")
    assert str(info.value) == (
        "no iceberg runtime for Spark 4.2 is released (known: Spark 3.5, Spark 4.0, Spark 4.1): read the table with "
        "Spark 3.5 or 4.0 or 4.1, or another engine (PyIceberg, delta-rs, Trino, DuckDB)"
    )


def test_every_sink_format_has_its_rules_and_an_opener():
    from airflow_kafka_offsets.core.sink_formats import SINK_FORMATS
    from airflow_kafka_offsets.sinks import OPENERS

    assert set(SINK_FORMATS) == set(OPENERS) == set(SinkFormat)
    assert {f.value: r.extra for f, r in SINK_FORMATS.items()} == {
        "directory": None,
        "iceberg": "iceberg",
        "delta": "delta",
    }
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {r.extra for r in SINK_FORMATS.values() if r.extra} <= set(extras)


def test_a_sink_of_many_tables_opens_through_the_registry(tmp_path):
    from airflow_kafka_offsets.core.sink_formats import SINK_FORMATS
    from airflow_kafka_offsets.core.spec import build_spec
    from airflow_kafka_offsets.sinks import open_sink
    from airflow_kafka_offsets.sinks.multi import MultiTableSink

    assert {f.value for f, r in SINK_FORMATS.items() if r.many_tables} == {"iceberg", "delta"}
    for fmt, tables in (("delta", {"a": "t_a", "b": "t_b"}), ("iceberg", {"a": "ns.t_a", "b": "ns.t_b"})):
        spec = build_spec("p", ["a", "b"], str(tmp_path), sink={"format": fmt, "tables": tables})
        sink = open_sink(spec, "sqlite://", "cat")
        assert isinstance(sink, MultiTableSink)
        assert sink.format.value == fmt
    with pytest.raises(InvalidPipelineSpecError, match="tables and route need the iceberg or delta sink"):
        build_spec("p", ["a"], str(tmp_path), sink={"format": "directory", "tables": {"a": "t"}})


@pytest.mark.parametrize(
    ("missing", "refusal"),
    [
        ("pyiceberg", "writes iceberg tables, which needs pyiceberg: pip install 'airflow-kafka-offsets\\[iceberg\\]'"),
        ("airflow_kafka_offsets.errors", None),  # the package's own module failing to import is not an extra
    ],
)
def test_a_table_library_that_fails_to_import_names_its_extra_and_nothing_else_does(monkeypatch, missing, refusal):
    from airflow_kafka_offsets.sinks import OPENERS, open_sink

    def opener(_: object) -> None:
        raise ImportError(f"cannot import from {missing}", name=missing)

    monkeypatch.setitem(OPENERS, SinkFormat.ICEBERG, opener)
    spec = build_spec("p", ["t"], "/lake", sink={"format": "iceberg", "table": "ns.t"})
    if refusal is None:
        with pytest.raises(ImportError, match=f"cannot import from {missing}"):
            open_sink(spec, "postgresql://unused", "kafka_offsets")
    else:
        with pytest.raises(ConfigurationError, match=refusal):
            open_sink(spec, "postgresql://unused", "kafka_offsets")
