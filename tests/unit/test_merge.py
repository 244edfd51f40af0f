"""Merge mode's rules (core/merge.py), its options (core/spec.py) and the key filter of its commit."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual, Or

from airflow_kafka_offsets.core.ddl import parse_ddl
from airflow_kafka_offsets.core.merge import (
    MIRROR_COLUMNS,
    ChangeFormat,
    Event,
    MergeSpec,
    applied,
    changes_of,
    last_changes,
    replay_refusal,
    rewind_refusal,
)
from airflow_kafka_offsets.core.model import SinkSpec
from airflow_kafka_offsets.core.spec import build_spec, updated_spec
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.service.jobs import build_job
from airflow_kafka_offsets.sinks.iceberg_merge import KEY_RANGES, candidate_filter, key_ranges, merge, rewrite_job
from airflow_kafka_offsets.sinks.schema import mirror_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import (
    DELETED,
    debezium_envelope_ddl,
    files_in_key_bounds,
    path_tail,
)

KEY = ("id",)
DBZ = ChangeFormat.DEBEZIUM
UPSERT = ChangeFormat.UPSERT


def dbz(offset: int, op: str, before: dict | None = None, after: dict | None = None, partition: int = 0) -> Event:
    return Event(partition, offset, op, before, after, position=f"lsn{offset}", ts_ms=1000 + offset)


def tomb(offset: int, key: dict | None = None, partition: int = 0) -> Event:
    return Event(partition, offset, record_key=key, tombstone=True)


def up(offset: int, row: dict, partition: int = 0) -> Event:
    return Event(partition, offset, after=row, record_key={"id": row.get("id")})


def mirror(events: list[Event], changes: ChangeFormat = DBZ, start: dict | None = None, key=KEY) -> dict:
    """The rows (without provenance) after applying ``events`` as one batch to ``start``."""
    rows = applied(start or {}, last_changes(events, key, changes))
    return {k: {c: v for c, v in row.items() if c not in MIRROR_COLUMNS} for k, row in rows.items()}


# --- one event's changes -------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["c", "r", "u"])
def test_create_read_and_update_put_the_after_image(op):
    (change,) = changes_of(dbz(7, op, None, {"id": 1, "v": "a"}), KEY, DBZ)
    assert (change.key, change.row, change.op, change.offset, change.position, change.ts_ms) == (
        (1,),
        {"id": 1, "v": "a"},
        op,
        7,
        "lsn7",
        1007,
    )


def test_delete_removes_the_before_key():
    (change,) = changes_of(dbz(3, "d", {"id": 4, "v": None}, None), KEY, DBZ)
    assert change.key == (4,) and change.deleted and change.op == "d"


def test_an_update_that_changes_the_key_deletes_the_old_key_first():
    first, second = changes_of(dbz(5, "u", {"id": 1, "v": "a"}, {"id": 2, "v": "a"}), KEY, DBZ)
    assert (first.key, first.deleted, first.order) == ((1,), True, 0)
    assert (second.key, second.row, second.order) == ((2,), {"id": 2, "v": "a"}, 1)


def test_an_update_without_a_before_image_or_with_the_same_key_is_one_put():
    assert [c.key for c in changes_of(dbz(1, "u", None, {"id": 2}), KEY, DBZ)] == [(2,)]
    assert [c.key for c in changes_of(dbz(1, "u", {"id": 2, "v": "x"}, {"id": 2, "v": "y"}), KEY, DBZ)] == [(2,)]


@pytest.mark.parametrize(
    "event",
    [
        tomb(9, {"id": 1}),  # Debezium's tombstone after a delete
        dbz(1, "t"),  # truncate
        dbz(1, "m"),  # a logical decoding message
        dbz(1, "c", None, None),  # no after image
        dbz(1, "c", None, {"id": None}),  # no key in it
        dbz(1, "d", None, None),  # a delete without a before image
    ],
)
def test_events_that_change_nothing_in_a_debezium_mirror(event):
    assert changes_of(event, KEY, DBZ) == []


def test_upsert_value_puts_the_row_and_a_tombstone_deletes_the_record_key():
    (put,) = changes_of(up(2, {"id": 5, "v": "z"}), KEY, UPSERT)
    assert (put.key, put.row, put.op) == ((5,), {"id": 5, "v": "z"}, "u")
    (gone,) = changes_of(tomb(3, {"id": 5}), KEY, UPSERT)
    assert (gone.key, gone.deleted, gone.op) == ((5,), True, "d")
    assert changes_of(tomb(4, None), KEY, UPSERT) == []  # a tombstone without a key names no row


def test_composite_keys_take_every_key_column():
    key = ("tenant", "id")
    (change,) = changes_of(dbz(1, "c", None, {"tenant": "t1", "id": 1, "v": 0}), key, DBZ)
    assert change.key == ("t1", 1)
    assert changes_of(dbz(1, "c", None, {"tenant": None, "id": 1}), key, DBZ) == []


# --- a batch: the last change per key wins ------------------------------------------------------


def test_last_change_per_key_wins_in_offset_order():
    events = [dbz(0, "c", None, {"id": 1, "v": "a"}), dbz(1, "u", {"id": 1}, {"id": 1, "v": "b"})]
    assert mirror(events) == {(1,): {"id": 1, "v": "b"}}
    assert mirror(list(reversed(events))) == {(1,): {"id": 1, "v": "b"}}  # offsets decide, not arrival


def test_insert_then_delete_in_one_batch_leaves_no_row():
    events = [dbz(0, "c", None, {"id": 1, "v": "a"}), dbz(1, "d", {"id": 1}, None), tomb(2, {"id": 1})]
    assert mirror(events) == {}


def test_delete_then_insert_in_one_batch_leaves_the_row():
    start = {(1,): {"id": 1, "v": "old"}}
    events = [dbz(0, "d", {"id": 1}, None), tomb(1, {"id": 1}), dbz(2, "c", None, {"id": 1, "v": "new"})]
    assert mirror(events, start=start) == {(1,): {"id": 1, "v": "new"}}


def test_a_key_change_moves_the_row_and_a_change_back_restores_it():
    start = {(1,): {"id": 1, "v": "a"}}
    moved = [dbz(0, "d", {"id": 1}, None), tomb(1, {"id": 1}), dbz(0, "c", None, {"id": 2, "v": "a"}, partition=1)]
    assert mirror(moved, start=start) == {(2,): {"id": 2, "v": "a"}}
    as_update = [dbz(0, "u", {"id": 1, "v": "a"}, {"id": 2, "v": "a"})]
    assert mirror(as_update, start=start) == {(2,): {"id": 2, "v": "a"}}
    back = [*as_update, dbz(1, "u", {"id": 2, "v": "a"}, {"id": 1, "v": "b"})]
    assert mirror(back, start=start) == {(1,): {"id": 1, "v": "b"}}


def test_keys_the_batch_does_not_touch_keep_their_rows_and_provenance():
    start = {(9,): {"id": 9, "v": "kept", "_kafka_offset": 3}}
    assert applied(start, last_changes([dbz(4, "c", None, {"id": 1, "v": "x"})], KEY, DBZ))[(9,)] == start[(9,)]


def test_a_put_row_carries_where_its_last_change_came_from():
    rows = applied({}, last_changes([dbz(4, "c", None, {"id": 1}), dbz(8, "u", None, {"id": 1})], KEY, DBZ))
    assert rows == {
        (1,): {
            "id": 1,
            "_kafka_partition": 0,
            "_kafka_offset": 8,
            "_source_position": "lsn8",
            "_source_ts_ms": 1008,
            "_op": "u",
        }
    }


def test_a_snapshot_read_then_updates_across_batches():
    first = last_changes([dbz(i, "r", None, {"id": i, "v": 0}) for i in range(5)], KEY, DBZ)
    state = applied({}, first)
    second = last_changes(
        [dbz(5, "u", {"id": 2}, {"id": 2, "v": 1}), dbz(6, "d", {"id": 4}, None), tomb(7, {"id": 4})], KEY, DBZ
    )
    state = applied(state, second)
    assert {k: r["v"] for k, r in state.items()} == {(0,): 0, (1,): 0, (2,): 1, (3,): 0}
    assert state[(2,)]["_op"] == "u" and state[(0,)]["_op"] == "r"


def test_upsert_batches_last_value_wins_and_tombstones_delete():
    events = [up(0, {"id": 1, "v": "a"}), up(1, {"id": 2, "v": "b"}), up(2, {"id": 1, "v": "c"}), tomb(3, {"id": 2})]
    assert mirror(events, UPSERT) == {(1,): {"id": 1, "v": "c"}}
    assert mirror([tomb(0, {"id": 1}), up(1, {"id": 1, "v": "again"})], UPSERT) == {(1,): {"id": 1, "v": "again"}}


# --- options -------------------------------------------------------------------------------------


def merge_spec(sink: dict, **options):
    base = {"format": "iceberg", "table": "lake.mirror"}
    options.setdefault("json_schema", "id INT, name STRING")
    return build_spec("p", ["t"], "/tmp/lake", sink={**base, **sink}, **options)


def test_merge_key_and_changes_make_a_merge_spec_stored_and_read_back():
    spec = merge_spec({"merge_key": "id", "changes": "upsert"})
    assert spec.sink.merge == MergeSpec(("id",), UPSERT)
    assert SinkSpec.from_json(spec.sink.to_json()) == spec.sink
    assert spec.decode is not None and spec.decode.max_errors == 0  # a change that cannot be read is never skipped
    assert merge_spec({"merge_key": ["id", "name"]}).sink.merge == MergeSpec(("id", "name"), DBZ)
    assert merge_spec({"merge_key": "id", "format": "delta", "table": "m"}).sink.merge == MergeSpec(("id",), DBZ)
    assert merge_spec({"merge_key": "id"}, max_decode_errors=5).decode.max_errors == 5
    assert updated_spec(spec, {"max_records_per_batch": 10}).sink == spec.sink


def test_an_iceberg_mirror_may_live_in_a_rest_catalog():
    sink = merge_spec({"merge_key": "id", "catalog_conn_id": "iceberg_rest"}).sink
    assert (sink.catalog_conn_id, sink.merge) == ("iceberg_rest", MergeSpec(("id",), DBZ))
    assert sink.to_json()["catalog_conn_id"] == "iceberg_rest"


def test_an_appending_sink_stores_no_merge_fields():
    assert "merge_key" not in build_spec("p", ["t"], "/x", sink={"format": "iceberg", "table": "a.b"}).to_json()["sink"]


@pytest.mark.parametrize(
    ("sink", "options", "message"),
    [
        ({"merge_key": "id", "format": "directory"}, {}, "needs the iceberg or delta sink"),
        ({"merge_key": "nope"}, {}, "merge_key column(s) nope are not in the json_schema"),
        ({"merge_key": "id,id"}, {}, "names a column twice"),
        ({"changes": "upsert"}, {}, "changes needs a merge_key"),
        ({"merge_key": "id", "changes": "cdc"}, {}, "changes must be one of debezium, upsert"),
        ({"merge_key": "id", "partition_by": "day"}, {}, "takes no partition_by"),
        ({"merge_key": "id"}, {"json_schema": None}, "needs a json_schema"),
        ({"merge_key": "id"}, {"json_schema": "id INT, _op STRING"}, "_op are the mirror's own columns"),
        ({"merge": "id"}, {}, "unknown sink option(s) merge"),
    ],
)
def test_bad_merge_options_are_refused_naming_the_problem(sink, options, message):
    with pytest.raises(InvalidPipelineSpecError, match="pipeline 'p'") as raised:
        merge_spec(sink, **options)
    assert message in str(raised.value)


# --- what Spark and the table are given ---------------------------------------------------------


def test_a_debezium_job_decodes_the_row_inside_its_envelope_and_names_the_merge():
    from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange

    spec = merge_spec({"merge_key": "id"})
    plan = BatchPlan("p", 1, 0, (PartitionRange("t", 0, 0, 5, 0),), "/x")
    job = build_job(plan, "a1", "/stage", {}, decode=spec.decode, sink=spec.sink)
    assert job["merge"] == {"key": ["id"], "changes": "debezium"}
    assert job["decode"]["schema"] == debezium_envelope_ddl("id INT, name STRING")
    names = [f.name for f in parse_ddl(job["decode"]["schema"])]
    assert names == ["before", "after", "op", "ts_ms", "source", "payload"]
    upsert = merge_spec({"merge_key": "id", "changes": "upsert"})
    assert build_job(plan, "a1", "/s", {}, decode=upsert.decode, sink=upsert.sink)["decode"]["schema"] == (
        "id INT, name STRING"
    )
    plain = build_spec("p", ["t"], "/x", json_schema="id INT")
    assert "merge" not in build_job(plan, "a1", "/s", {}, decode=plain.decode, sink=plain.sink)


def test_the_mirror_schema_is_the_row_then_the_provenance_columns():
    spec = merge_spec({"merge_key": "id"})
    assert spec.sink.merge is not None
    schema = mirror_schema(spec.decode, spec.sink.merge)
    assert schema.names == ["id", "name", *MIRROR_COLUMNS]
    assert schema.field("id").type == pa.int32() and schema.field("_kafka_offset").type == pa.int64()


def test_a_change_sets_keys_are_cut_into_ranges_at_their_widest_gaps():
    recent, old = list(range(1_000_000, 1_000_300)), [i * 10_000 for i in range(40)]
    ranges = key_ranges(sorted(recent + old))
    assert len(ranges) == KEY_RANGES and ranges[-1] == recent
    assert sorted(v for part in ranges for v in part) == sorted(recent + old)  # every key in one range, once
    assert key_ranges(list(range(500))) == [list(range(500))]  # consecutive keys: one range
    assert key_ranges(["a", "b", "z"]) == [["a", "b", "z"]]  # no gaps between strings: one range
    expression = candidate_filter(pa.table({"id": recent + old}), ["id"])
    depth, node = 0, expression
    while isinstance(node, Or):
        node, depth = node.right, depth + 1
    assert depth <= 4 and node == And(GreaterThanOrEqual("id", 1_000_000), LessThanOrEqual("id", 1_000_299))
    composite = candidate_filter(pa.table({"t": ["b", "a", "b"], "id": [1, 2, 3]}), ["t", "id"])
    assert composite == And(GreaterThanOrEqual("t", "a"), LessThanOrEqual("t", "b"))  # the first column's range


@pytest.mark.parametrize("key", [("id",), ("t", "id")])
def test_a_merge_rewrites_only_the_files_holding_a_changed_key(tmp_path, key):
    """A real Iceberg table (PyIceberg's SQL catalog on SQLite): four files of 100 keys each; a change set that
    updates and deletes keys of one file and adds new keys leaves the other three files as they were."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("ns")
    schema = pa.schema([pa.field("t", pa.string()), pa.field("id", pa.int64()), pa.field("n", pa.int64())])
    table = catalog.create_table("ns.m", schema=schema)
    for first in range(0, 400, 100):
        table.append(pa.table({"t": ["x"] * 100, "id": range(first, first + 100), "n": [0] * 100}, schema=schema))
    before = {task.file.file_path for task in table.scan().plan_files()}
    changes = pa.table(
        {
            "t": ["x"] * 5,
            "id": [210, 220, 230, 1000, 1001],
            "n": [1, 1, None, 2, 2],
            DELETED: [False, False, True, False, False],
        },
        schema=schema.append(pa.field(DELETED, pa.bool_())),
    )
    transaction = table.transaction()
    merge(transaction, changes, key, {"kafka-offsets.batch": "7"})
    transaction.commit_transaction()
    table = table.refresh()
    rows = {r["id"]: r["n"] for r in table.scan().to_arrow().to_pylist()}
    assert len(rows) == 400 - 1 + 2 and 230 not in rows
    assert (rows[210], rows[220], rows[1000], rows[1001], rows[209]) == (1, 1, 2, 2, 0)
    after = {task.file.file_path for task in table.scan().plan_files()}
    assert len(before - after) == 1 and len(after - before) == 2  # the file of 200-299 rewritten; the puts
    assert all(s.summary["kafka-offsets.batch"] == "7" for s in table.snapshots()[4:])


def test_refusals_name_the_pipeline_the_batch_and_what_to_do():
    assert "batch 3" in replay_refusal("p", 3, 5) and "only the latest batch (5) replays" in replay_refusal("p", 3, 5)
    assert "t-0, t-1" in rewind_refusal("p", ["t-0", "t-1"]) and "only skip forward" in rewind_refusal("p", ["t-0"])


def test_the_files_spark_reads_for_a_rewrite_are_those_whose_key_bounds_hold_a_changed_key():
    files = [
        {"path": "a", "lower": 0, "upper": 99},
        {"path": "b", "lower": 100, "upper": 199},
        {"path": "c", "lower": None, "upper": None},  # no statistics: always read
        {"path": "d", "lower": 300, "upper": None},
        {"path": "e", "lower": "k", "upper": "q"},  # a bound of another type than the keys': read
    ]
    assert files_in_key_bounds(files, [150]) == [1, 2, 4]
    assert files_in_key_bounds(files, [99, 100]) == [0, 1, 2, 4]
    assert files_in_key_bounds(files, [200, 250]) == [2, 4]  # between the files' bounds: only the unknown ones
    assert files_in_key_bounds(files, [1000]) == [2, 3, 4]
    assert files_in_key_bounds(files, []) == []
    words = [{"path": "w", "lower": "apple", "upper": "melon"}, {"path": "x", "lower": "n", "upper": "p"}]
    assert files_in_key_bounds(words, ["banana"]) == [0] and files_in_key_bounds(words, ["o", "zebra"]) == [1]


@pytest.mark.parametrize(
    ("spark_name", "listed"),
    [
        ("file:/tmp/t/data/x.parquet", "/tmp/t/data/x.parquet"),
        ("file:///tmp/t/data/x.parquet", "file:/tmp/t/data/x.parquet"),
        ("s3a://lake/t/batch=000000000001/a/part-0.parquet", "s3://lake/t/batch=000000000001/a/part-0.parquet"),
        ("file:/tmp/a%20b/x.parquet", "/tmp/a b/x.parquet"),
    ],
)
def test_a_file_spark_names_is_the_listed_file_whatever_its_scheme_or_escapes(spark_name, listed):
    assert path_tail(spark_name) == path_tail(listed)
    assert path_tail("s3://lake/t/x.parquet") != path_tail("s3://other/t/x.parquet")


def test_a_rewrite_job_lists_the_live_files_with_their_first_key_columns_bounds(tmp_path):
    """A real Iceberg table: the job lists each live data file with the bounds its metadata records; a long
    string's upper bound (maybe truncated) is left unknown; a table with no snapshot lists nothing."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("ns")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    table = catalog.create_table("ns.m", schema=schema)
    assert rewrite_job(table, ["id"]) == {"base": None, "files": []}
    assert rewrite_job(None, ["id"]) == {"base": None, "files": []}
    table.append(pa.table({"id": [5, 9, 7], "name": ["a", "b", "c"]}, schema=schema))
    table.append(pa.table({"id": [20, 30], "name": ["z" * 20, "y" * 3]}, schema=schema))
    job = rewrite_job(table, ["id"])
    assert job["base"] == str(table.current_snapshot().snapshot_id)
    assert sorted((f["lower"], f["upper"]) for f in job["files"]) == [(5, 9), (20, 30)]
    assert {f["path"] for f in job["files"]} == {t.file.file_path for t in table.scan().plan_files()}
    by_name = sorted((f["lower"], f["upper"]) for f in rewrite_job(table, ["name"])["files"])
    assert by_name == [("a", "c"), ("y" * 3, None)]  # "z" * 20 is past Iceberg's 16-character string bounds
