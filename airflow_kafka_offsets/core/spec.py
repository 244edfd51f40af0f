"""Pipeline specs: validation of what users type (names, topics, policies, caps) into a PipelineSpec.

Pure: no I/O, so every rule can be tested by the hundred.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow_kafka_offsets.core.avro import build_value_format
from airflow_kafka_offsets.core.ddl import parse_ddl
from airflow_kafka_offsets.core.merge import ChangeFormat, MergeSpec, check_row
from airflow_kafka_offsets.core.model import (
    DataLossPolicy,
    DecodeSpec,
    PipelineSpec,
    SinkFormat,
    SinkSpec,
    StartPolicy,
)
from airflow_kafka_offsets.core.options import option_names
from airflow_kafka_offsets.core.routing import TABLE_NAME, build_routes
from airflow_kafka_offsets.core.sink_formats import SINK_FORMATS
from airflow_kafka_offsets.core.sink_options import SinkOptions
from airflow_kafka_offsets.core.values import enum_value, optional_bool, optional_int
from airflow_kafka_offsets.errors import InvalidPipelineSpecError

PIPELINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Kafka's own rule for topic names.
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def validate_pipeline_name(name: str) -> str:
    """Pipeline names end up in paths and log lines: keep them to a safe alphabet."""
    if not isinstance(name, str) or not PIPELINE_NAME.fullmatch(name) or name in {".", ".."}:
        raise InvalidPipelineSpecError(
            f"invalid pipeline name {name!r}: use 1-128 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


PARTITIONINGS = (None, "day")  # none, or the UTC day of the record timestamp


def build_sink(sink: str | Mapping[str, Any] | SinkSpec | None, pipeline: str, topics: Sequence[str] = ()) -> SinkSpec:
    """``sink`` as a format name, ``{"format": ..., "table": ...}``, ``{"format": ..., "tables": {topic:
    table}, "route": {...}}`` (many tables: ``core/routing.py``), or None for Parquet directories."""
    if isinstance(sink, SinkSpec):
        sink = sink.to_json()
    if sink is None or (isinstance(sink, str) and not sink.strip()):
        return SinkSpec()
    options: dict[str, Any] = {"format": sink.strip()} if isinstance(sink, str) else dict(sink)
    unknown = set(options) - set(option_names(SinkOptions))
    if unknown:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: unknown sink option(s) {', '.join(sorted(unknown))}; "
            "a sink takes format, table (or tables and route), partition_by, (Iceberg) catalog_conn_id, "
            "and merge_key with changes"
        )
    sink_format = enum_value(SinkFormat, options.get("format") or SinkFormat.DIRECTORY, "sink format")
    table = (options.get("table") or "").strip() or None
    partition_by = (options.get("partition_by") or "").strip() or None
    catalog_conn_id = (options.get("catalog_conn_id") or "").strip() or None
    rules = SINK_FORMATS[sink_format]
    merge = _merge(pipeline, options, sink_format)
    if catalog_conn_id is not None and not rules.catalog_conn:
        takers = " and ".join(f.value for f, r in SINK_FORMATS.items() if r.catalog_conn)
        raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: catalog_conn_id applies to the {takers} sink only")
    if not rules.table:
        if table is not None or partition_by is not None:
            raise InvalidPipelineSpecError(
                f"pipeline {pipeline!r}: the {sink_format.value} sink takes no table and no partition_by (batches "
                "are its partitions)"
            )
        if options.get("tables") or options.get("route"):
            takers = " or ".join(f.value for f, r in SINK_FORMATS.items() if r.many_tables)
            raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: tables and route need the {takers} sink")
        return SinkSpec(sink_format)
    if options.get("tables") or options.get("route"):
        return _multi_table_sink(pipeline, options, sink_format, table, partition_by, catalog_conn_id, topics)
    if partition_by not in PARTITIONINGS:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: partition_by must be one of {', '.join(map(str, PARTITIONINGS))}, "
            f"got {partition_by!r}"
        )
    if table is None or not TABLE_NAME.fullmatch(table):
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: the {sink_format.value} sink needs a table such as 'analytics.events' "
            f"(an optional namespace and a name of letters, digits and '_'), got {table!r}"
        )
    if rules.namespace and "." not in table:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: an {rules.title} table needs a namespace, as in 'analytics.{table}'"
        )
    return SinkSpec(sink_format, table, partition_by, catalog_conn_id, merge=merge)


def _merge(pipeline: str, options: Mapping[str, Any], sink_format: SinkFormat) -> MergeSpec | None:
    """Merge mode's key and change format, or None when the sink appends (no ``merge_key``)."""
    given = options.get("merge_key")
    names = [k.strip() for k in given.split(",")] if isinstance(given, str) else [str(k).strip() for k in given or ()]
    key = tuple(k for k in names if k)
    if not key:
        if options.get("changes"):
            raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: changes needs a merge_key (the mirror's key)")
        return None
    if not SINK_FORMATS[sink_format].merge:
        takers = " or ".join(f.value for f, r in SINK_FORMATS.items() if r.merge)
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: merge_key (a mirror table) needs the {takers} sink; the {sink_format.value} "
            "sink appends"
        )
    if len(set(key)) != len(key):
        raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: merge_key names a column twice: {list(key)}")
    given = [name for name in ("partition_by", "tables", "route") if options.get(name)]
    if given:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: a mirror table (merge_key) takes no {', '.join(given)}: it is one table, "
            "unpartitioned"
        )
    changes = enum_value(
        ChangeFormat, options.get("changes") or ChangeFormat.DEBEZIUM, f"pipeline {pipeline!r}: changes"
    )
    return MergeSpec(key, changes)


def _check_merge_decode(pipeline: str, merge: MergeSpec, decode: DecodeSpec | None) -> DecodeSpec:
    """A mirror's rows are the decoded values' (the json_schema names the row's columns; an Avro reader schema,
    checked when a batch is planned, is the row or Debezium's envelope of it); every record must decode
    (max_decode_errors defaults to 0: a change that cannot be read is never skipped silently)."""
    if decode is None:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: a mirror table (merge_key) needs a json_schema naming the source row's "
            "columns (for Debezium: the columns of before/after), or for Avro Debezium envelopes a value_format"
        )
    if decode.avro is None:
        check_row(pipeline, merge.key, decode.schema, "the json_schema")
    return decode if decode.max_errors is not None else replace(decode, max_errors=0)


def _multi_table_sink(
    pipeline: str,
    options: Mapping[str, Any],
    sink_format: SinkFormat,
    table: str | None,
    partition_by: str | None,
    catalog_conn_id: str | None,
    topics: Sequence[str],
) -> SinkSpec:
    """A sink of many tables: no single table, no partitioning; Iceberg tables in the ledger's catalog
    (every table's pointer moves in the ledger's transaction) or in ``catalog_conn_id``'s (committed
    table by table)."""
    refused = {"table": table, "partition_by": partition_by}
    given = [name for name, value in refused.items() if value is not None]
    if given:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: a sink of many tables (tables or route) takes no {', '.join(given)}"
        )
    routes = build_routes(
        pipeline, options.get("tables"), options.get("route"), topics, namespace=SINK_FORMATS[sink_format].namespace
    )
    return SinkSpec(sink_format, catalog_conn_id=catalog_conn_id, routes=routes)


def validate_topics(pipeline: str, topics: Sequence[str] | str) -> tuple[str, ...]:
    """The pipeline's topics (a list, or one comma-separated string), each a valid Kafka topic name, once."""
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    topic_list = list(topics)
    if not topic_list:
        raise InvalidPipelineSpecError(f"pipeline {pipeline!r} names no topics")
    for topic in topic_list:
        if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic) or topic in {".", ".."}:
            raise InvalidPipelineSpecError(f"invalid Kafka topic name {topic!r} in pipeline {pipeline!r}")
    if len(set(topic_list)) != len(topic_list):
        raise InvalidPipelineSpecError(f"pipeline {pipeline!r} lists a topic twice: {topic_list}")
    return tuple(sorted(topic_list))


def build_spec(
    name: str,
    topics: Sequence[str] | str,
    output_root: str,
    *,
    starting_offsets: str | StartPolicy = StartPolicy.EARLIEST,
    new_partition_offsets: str | StartPolicy = StartPolicy.EARLIEST,
    on_data_loss: str | DataLossPolicy = DataLossPolicy.FAIL,
    max_records_per_batch: int | str | None = None,
    max_records_per_partition: int | str | None = None,
    consumer_group: str | None = None,
    json_schema: str | None = None,
    max_decode_errors: int | str | None = None,
    sink: str | Mapping[str, Any] | SinkSpec | None = None,
    value_format: Mapping[str, Any] | str | None = None,
    keep_raw_value: bool | str | None = None,
) -> PipelineSpec:
    """Validate user input (often rendered templates) into a :class:`PipelineSpec`."""
    validate_pipeline_name(name)
    topic_list = validate_topics(name, topics)
    decode = None
    avro = build_value_format(value_format, name, topic_list)
    has_json_schema = json_schema is not None and bool(str(json_schema).strip())
    if avro is not None and has_json_schema:
        raise InvalidPipelineSpecError(
            f"pipeline {name!r}: json_schema and value_format exclude each other (JSON values take a json_schema, "
            "Avro values a value_format): give one"
        )
    if avro is not None:
        decode = DecodeSpec("", optional_int(max_decode_errors, "max_decode_errors", minimum=0), avro)
    elif has_json_schema:
        parse_ddl(str(json_schema).strip())  # refused here rather than by Spark mid-batch
        decode = DecodeSpec(str(json_schema).strip(), optional_int(max_decode_errors, "max_decode_errors", minimum=0))
    elif max_decode_errors not in (None, ""):
        raise InvalidPipelineSpecError(
            f"pipeline {name!r}: max_decode_errors needs a json_schema or a value_format to decode with"
        )
    if not optional_bool(keep_raw_value, f"pipeline {name!r}: keep_raw_value", default=True):
        if decode is None:
            raise InvalidPipelineSpecError(
                f"pipeline {name!r}: keep_raw_value=false needs a json_schema or a value_format to decode with "
                "(without decoding, the raw value is the record)"
            )
        decode = replace(decode, keep_raw_value=False)
    if not isinstance(output_root, str) or not output_root.strip():
        raise InvalidPipelineSpecError(f"pipeline {name!r} needs an output_root")
    sink_spec = build_sink(sink, name, topic_list)
    if sink_spec.merge is not None:
        decode = _check_merge_decode(name, sink_spec.merge, decode)
    return PipelineSpec(
        name=name,
        topics=topic_list,
        output_root=output_root.strip(),
        starting_offsets=enum_value(StartPolicy, starting_offsets, "starting_offsets"),
        new_partition_offsets=enum_value(StartPolicy, new_partition_offsets, "new_partition_offsets"),
        on_data_loss=enum_value(DataLossPolicy, on_data_loss, "on_data_loss"),
        max_records_per_batch=optional_int(max_records_per_batch, "max_records_per_batch", minimum=1),
        max_records_per_partition=optional_int(max_records_per_partition, "max_records_per_partition", minimum=1),
        consumer_group=(consumer_group or "").strip() or None,
        decode=decode,
        sink=sink_spec,
    )


def updated_spec(stored: PipelineSpec, changes: Mapping[str, Any]) -> PipelineSpec:
    """``stored`` with ``changes`` (``build_spec`` arguments) applied, validated like a new spec."""
    current: dict[str, Any] = {
        "starting_offsets": stored.starting_offsets,
        "new_partition_offsets": stored.new_partition_offsets,
        "on_data_loss": stored.on_data_loss,
        "max_records_per_batch": stored.max_records_per_batch,
        "max_records_per_partition": stored.max_records_per_partition,
        "consumer_group": stored.consumer_group,
        "json_schema": stored.decode.schema if stored.decode and not stored.decode.avro else None,
        "max_decode_errors": stored.decode.max_errors if stored.decode else None,
        "value_format": stored.decode.avro.to_json() if stored.decode and stored.decode.avro else None,
        "keep_raw_value": stored.decode.keep_raw_value if stored.decode else None,
    }
    unknown = set(changes) - set(current) - {"topics", "sink"}
    if unknown:
        raise InvalidPipelineSpecError(f"unknown spec field(s): {', '.join(sorted(unknown))}")
    current.update({k: v for k, v in changes.items() if k not in ("topics", "sink")})
    return build_spec(
        stored.name,
        changes.get("topics", stored.topics),
        stored.output_root,
        sink=changes.get("sink", stored.sink),
        **current,
    )
