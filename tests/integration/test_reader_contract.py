"""The reader contract: every location committed_outputs() lists is readable by readers this package did not
write (pyarrow.dataset, Spark), after an empty first batch, a skip batch and a reset, and together they hold
exactly the committed records. The batches run on the warm Spark Connect server, one local Spark session reads.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTP
from pyspark.sql import SparkSession

from airflow_kafka_offsets.core.operation_fields import build_reset_request
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.readers import committed_outputs
from airflow_kafka_offsets.service.operations.reset import reset_offsets
from airflow_kafka_offsets.sinks.schema import RECORD_SCHEMA, output_schema

from .helpers import assert_exactly_once, produce
from .pipeline import commit, operation_context, plan, run_once

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")


def test_every_listed_output_is_readable_after_empty_skip_and_reset_batches(
    stack, ledger, make_topic, kafka_admin, tmp_path
):
    topic = make_topic(partitions=2)
    spec = build_spec("readers", [topic], str(tmp_path), on_data_loss="skip")
    # batch 1: the first run on an empty topic reads nothing but starts the cursors
    first = plan(ledger, spec, stack).plan
    assert first.batch_id == 1 and not first.readable_ranges
    commit(ledger, spec, 1)
    # batch 2: records
    produced = produce(stack.bootstrap_servers, topic, 10, partitions=2)
    assert run_once(ledger, spec, stack).records == 10
    # batch 3: a skip batch, every new record deleted before it was planned
    produce(stack.bootstrap_servers, topic, 6, partitions=2)
    gone = [KafkaTP(topic, p, 8) for p in range(2)]
    for future in kafka_admin.delete_records(gone).values():
        future.result(timeout=30)
    skip = plan(ledger, spec, stack).plan
    assert [(r.cursor, r.start, r.end) for r in skip.ranges] == [(5, 8, 8), (5, 8, 8)]
    commit(ledger, spec, 3)
    # batch 4: a forward reset over 4 records; batch 5: records again
    produce(stack.bootstrap_servers, topic, 4, partitions=2)
    assert (
        reset_offsets(
            operation_context(ledger, stack), "readers", build_reset_request("to-latest"), dry_run=False
        ).batch_id
        == 4
    )
    produced += produce(stack.bootstrap_servers, topic, 4, partitions=2)
    assert run_once(ledger, spec, stack).records == 4

    outputs = committed_outputs(ledger, "readers")
    assert [(o.batch_id, o.records) for o in outputs] == [(1, 0), (2, 10), (3, 0), (5, 4)]
    assert [o.path for o in outputs] == [str(tmp_path / "readers" / f"batch={b:012d}") for b in (1, 2, 3, 5)]
    assert [o.batch_id for o in committed_outputs(ledger, "readers", since_batch=2)] == [3, 5]

    # pyarrow.dataset, one dataset per listed location (empty ones included), then their union
    parts = [ds.dataset(o.path, format="parquet") for o in outputs]
    assert [p.count_rows() for p in parts] == [0, 10, 0, 4]
    assert all(p.schema.remove_metadata() == RECORD_SCHEMA for p in parts)
    table = ds.dataset(parts).to_table()
    assert_exactly_once(table.to_pylist(), produced)

    # Spark, reading every listed location at once, and the empty ones alone
    spark = SparkSession.builder.master("local[1]").appName("reader-contract").getOrCreate()
    try:
        rows = spark.read.parquet(*[o.path for o in outputs]).collect()
        assert_exactly_once([r.asDict() for r in rows], produced)
        empty = spark.read.parquet(outputs[0].path, outputs[2].path)
        assert empty.count() == 0 and empty.columns == RECORD_SCHEMA.names
    finally:
        spark.stop()
    assert not Path(tmp_path / "readers" / f"batch={4:012d}").exists()  # the reset batch has no output


def test_an_empty_batch_of_a_decoding_pipeline_has_the_columns_spark_writes(stack, ledger, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    schema = "id STRING, n INT, tags ARRAY<STRING>, at TIMESTAMP, m MAP<STRING, BIGINT>, s STRUCT<a: DOUBLE>"
    spec = build_spec("decoding", [topic], str(tmp_path), json_schema=schema)
    assert not plan(ledger, spec, stack).plan.readable_ranges
    commit(ledger, spec, 1)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    producer.produce(
        topic,
        key=b"a",
        value=b'{"id": "a", "n": 1, "tags": ["x"], "at": "2026-11-22T01:00:00Z", "m": {"k": 2}, "s": {"a": 0.5}}',
    )
    producer.produce(topic, key=b"b", value=b'{"id": ')
    assert producer.flush(30) == 0
    assert run_once(ledger, spec, stack).records == 2

    empty, written = [ds.dataset(o.path, format="parquet") for o in committed_outputs(ledger, "decoding")]
    assert empty.schema.remove_metadata() == written.schema.remove_metadata() == output_schema(spec.decode)
    table = ds.dataset([empty, written]).to_table()
    assert table.column("decoded").to_pylist()[0]["tags"] == ["x"] and table.column("decode_error").to_pylist() == [
        None,
        "value does not match the JSON schema",
    ]
