"""A mirror table on Delta (sinks/delta_merge.py, DeltaSink in merge mode) on a local directory: the change
sets a batch's Spark attempt stages are written here with pyarrow from core/merge.py's rules, so the table
is compared with what those rules say, commit by commit (the real chain: tests/integration/test_delta_mirror.py).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableMerger
from hypothesis import given
from hypothesis import strategies as st

from airflow_kafka_offsets.core.merge import ChangeFormat, Event, applied, last_changes
from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import MergeOperationRefusedError, SchemaEvolutionError
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.sinks import open_sink
from airflow_kafka_offsets.sinks.base import Publication
from airflow_kafka_offsets.sinks.delta import DeltaSink, app_id
from airflow_kafka_offsets.sinks.delta_merge import (
    batch_merges,
    conformed,
    file_stats,
    held_attempt,
    key_predicate,
    latest_merges,
    rewrite_job,
)
from airflow_kafka_offsets.sinks.schema import mirror_schema
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import CHANGES_DIR, DELETED

KEY = ("id",)
DBZ = ChangeFormat.DEBEZIUM
UID = "uid-1"


def dbz(offset: int, op: str, before: dict | None = None, after: dict | None = None) -> Event:
    return Event(0, offset, op, before, after, position=f"{offset}", ts_ms=offset)


def spec(root: str, json_schema: str = "id INT, name STRING"):
    return build_spec(
        "p", ["t"], root, json_schema=json_schema, sink={"format": "delta", "table": "m", "merge_key": "id"}
    )


class Mirror:
    """A Delta mirror sink on ``root`` and the batches staged for it: ``state`` is what core/merge.py says
    the table holds after the batches published so far."""

    def __init__(self, root: str) -> None:
        self.spec = spec(root)
        sink = open_sink(self.spec, None, "c")
        assert isinstance(sink, DeltaSink) and sink.merge is not None
        self.sink = sink
        self.sink.check_writable(self.spec.decode)
        self.state: dict = {}
        self.offset = 0

    def stage(self, batch: int, attempt: str, events: list[Event], replay: bool = False) -> Publication:
        """Write the change set of ``events`` where attempt ``attempt`` of ``batch`` stages it."""
        changes = last_changes(events, KEY, DBZ)
        rows = [
            {
                **(c.row or dict(zip(KEY, c.key))),
                "_kafka_partition": c.partition,
                "_kafka_offset": c.offset,
                "_source_position": c.position,
                "_source_ts_ms": c.ts_ms,
                "_op": c.op,
                DELETED: c.deleted,
            }
            for c in changes.values()
        ]
        schema = mirror_schema(self.spec.decode, self.spec.sink.merge).append(pa.field(DELETED, pa.bool_()))
        staging = self.sink.staging_uri("p", batch, attempt)
        target = files.join(staging, CHANGES_DIR)
        fs, path = files.Storage().filesystem(target)
        fs.create_dir(path, recursive=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), f"{path}/part-00000.parquet")
        if not replay:
            self.state = applied(self.state, changes)
        plan = BatchPlan("p", batch, 0, (PartitionRange("t", 0, 0, 10, 0),), self.sink.location)
        return Publication(UID, plan, attempt, staging, len(events), self.spec.decode, replay=replay)

    def events(self, *changes: tuple[str, int, str | None]) -> list[Event]:
        """Debezium events: (op, id, name) with c/u/d."""
        found = []
        for op, id_, name in changes:
            self.offset += 1
            row = {"id": id_, "name": name}
            found.append(dbz(self.offset, op, row if op != "c" else None, row if op != "d" else None))
        return found

    def foreign_append(self) -> None:
        """Another writer's commit: a row of key 9."""
        row = pa.Table.from_pylist([{"id": 9, "name": "foreign"}], schema=pa.schema(self.table().schema()))
        write_deltalake(self.sink.location, row, mode="append")

    def table(self) -> DeltaTable:
        return self.sink.table()

    def rows(self) -> dict:
        return {(r["id"],): r for r in self.table().to_pyarrow_table().to_pylist()}


@pytest.fixture()
def mirror(tmp_path) -> Mirror:
    return Mirror(str(tmp_path / "lake"))


# --- the pure parts -------------------------------------------------------------------------------


def test_the_merge_joins_on_every_key_column_quoted():
    assert key_predicate(["id"]) == 't."id" = s."id"'
    assert key_predicate(["Tenant", 'we"ird']) == 't."Tenant" = s."Tenant" AND t."we""ird" = s."we""ird"'


def test_the_change_set_is_conformed_to_the_table_columns_order_and_types():
    changes = pa.table({"name": ["a"], "id": pa.array([1], pa.int64()), DELETED: [False]})
    schema = pa.schema([("id", pa.int32()), ("name", pa.string()), ("added", pa.int64())])
    got = conformed(changes, schema)
    assert got.schema.names == ["id", "name", "added", DELETED]
    assert got.schema.field("id").type == pa.int32() and got.to_pylist() == [
        {"id": 1, "name": "a", "added": None, DELETED: False}
    ]


def commit(version: int, batch: int, operation: str = "commit", attempt: str = "a1") -> dict:
    return {
        "version": version,
        "kafka-offsets.batch": str(batch),
        "kafka-offsets.operation": operation,
        "kafka-offsets.attempt": attempt,
    }


def test_a_batch_merges_are_those_since_its_latest_abort():
    history = [commit(1, 1), commit(2, 2, attempt="x"), commit(3, 2, "abort", ""), commit(5, 1, "replay", "a2")]
    assert [c["version"] for c in batch_merges(history, 1)] == [1, 5]
    assert batch_merges(history, 2) == [] and held_attempt(history, 2) is None
    assert held_attempt(history, 1) == "a2" and held_attempt(history, 3) is None


def test_only_a_batch_whose_merge_is_the_table_latest_commit_is_merged_again_or_restored():
    history = [commit(1, 1), commit(2, 2)]
    assert [c["version"] for c in latest_merges(history, 2, 2, "w", "lost")] == [2]
    assert latest_merges(history, 3, 2, "w", "lost") == []  # nothing of it in the table
    with pytest.raises(
        MergeOperationRefusedError,
        match=r"w: the Delta table has commits after the batch's \(version 2, the batch's last 1\); lost",
    ):
        latest_merges(history, 1, 2, "w", "lost")


@given(
    st.lists(
        st.tuples(st.sampled_from("cud"), st.integers(0, 6), st.sampled_from(["a", "b", None])),
        max_size=30,
    ),
    st.dictionaries(st.integers(0, 6), st.sampled_from(["x", "y"]), max_size=7),
)
def test_merging_a_change_set_again_on_its_own_result_changes_no_row(ops, start):
    """Why a replay of a mirror's latest batch is one merge on the current state: it equals a restore to the
    state before the batch and the merge."""
    events = [dbz(i, op, {"id": k, "name": n}, {"id": k, "name": n}) for i, (op, k, n) in enumerate(ops)]
    changes = last_changes(events, KEY, DBZ)
    rows = {(k,): {"id": k, "name": v} for k, v in start.items()}
    once = applied(rows, changes)
    assert applied(once, changes) == once


# --- the sink, on a local table --------------------------------------------------------------------


def test_a_merge_is_one_commit_with_the_batch_app_transaction_and_a_retry_does_not_merge_twice(mirror):
    first = mirror.stage(1, "a1", mirror.events(("c", 1, "a"), ("c", 2, "b"), ("c", 3, "c"), ("d", 3, None)))
    version = mirror.table().version()
    mirror.sink.publish(None, first)
    table = mirror.table()
    assert table.version() == version + 1 and table.transaction_version(app_id(UID)) == 1
    assert table.history(1)[0]["kafka-offsets.operation"] == "commit" and table.history(1)[0]["operation"] == "MERGE"
    assert mirror.rows() == mirror.state and set(mirror.state) == {(1,), (2,)}
    assert mirror.sink.published_attempt(UID, first.plan) == "a1"
    mirror.sink.publish(None, first)  # a retry after a crash before the ledger's commit
    assert mirror.table().version() == version + 1
    second = mirror.stage(2, "b1", mirror.events(("u", 1, "A"), ("d", 2, None), ("c", 4, "d")))
    assert mirror.sink.published_attempt(UID, second.plan) is None
    mirror.sink.publish(None, second)
    assert mirror.rows() == mirror.state and set(mirror.state) == {(1,), (4,)}


def test_a_change_set_of_no_change_commits_nothing(mirror):
    version = mirror.table().version()
    mirror.sink.publish(None, mirror.stage(1, "a1", []))
    assert mirror.table().version() == version


def test_replay_merges_the_latest_batch_again_in_one_commit_and_refuses_after_a_later_commit(mirror):
    mirror.sink.publish(None, mirror.stage(1, "a1", mirror.events(("c", 1, "a"), ("c", 2, "b"))))
    events = mirror.events(("u", 1, "A"), ("d", 2, None))
    mirror.sink.publish(None, mirror.stage(2, "b1", events))
    replayed = mirror.stage(2, "b2", events, replay=True)  # the same records read again
    version = mirror.table().version()
    mirror.sink.publish(None, replayed)
    assert mirror.table().version() == version + 1 and mirror.rows() == mirror.state
    assert mirror.table().history(1)[0]["kafka-offsets.operation"] == "replay"
    mirror.sink.publish(None, replayed)  # landed: not again
    assert mirror.table().version() == version + 1
    mirror.foreign_append()  # another writer's commit after the batch's
    again = mirror.stage(2, "b3", events, replay=True)
    with pytest.raises(MergeOperationRefusedError, match=r"commits after the batch.s that change its rows"):
        mirror.sink.publish(None, again)


def test_abort_restores_the_version_before_a_crashed_merge_only_while_it_is_the_latest_commit(mirror):
    mirror.sink.publish(None, mirror.stage(1, "a1", mirror.events(("c", 1, "a"), ("c", 2, "b"))))
    before = mirror.rows()
    crashed = mirror.stage(2, "b1", mirror.events(("u", 1, "A"), ("d", 2, None)))
    mirror.sink.publish(None, crashed)
    left = mirror.sink.withdraw(None, UID, crashed.plan)
    assert left == crashed.staging_uri and mirror.rows() == before
    assert mirror.table().history(1)[0]["kafka-offsets.operation"] == "abort"
    assert mirror.sink.published_attempt(UID, crashed.plan) is None
    assert mirror.sink.withdraw(None, UID, crashed.plan) is None  # nothing of it left
    third = mirror.stage(3, "c1", mirror.events(("c", 5, "e")))
    mirror.sink.publish(None, third)
    mirror.foreign_append()
    with pytest.raises(MergeOperationRefusedError, match="restoring the version before it would lose them"):
        mirror.sink.withdraw(None, UID, third.plan)


def test_a_commit_that_conflicts_with_the_merge_is_merged_again_on_the_new_state(mirror, monkeypatch):
    mirror.sink.publish(None, mirror.stage(1, "a1", mirror.events(("c", 1, "a"), ("c", 2, "b"))))
    mirror.foreign_append()  # another writer: a second file
    execute = TableMerger.execute
    calls = []

    def other_writer_first(merger: TableMerger) -> dict:
        if not calls:  # the merge planned on the table as loaded; a compaction replaces the files it read
            DeltaTable(mirror.sink.location).optimize.compact()
        calls.append(1)
        return execute(merger)

    monkeypatch.setattr(TableMerger, "execute", other_writer_first)
    mirror.sink.publish(None, mirror.stage(2, "b1", mirror.events(("u", 2, "B"))))
    assert len(calls) == 2  # the first merge's commit conflicted; the second ran on the new state
    rows = mirror.rows()
    assert rows.pop((9,))["name"] == "foreign" and rows == mirror.state


def test_the_mirror_schema_evolves_by_added_columns_and_refuses_others_naming_them(tmp_path):
    root = str(tmp_path / "lake")
    Mirror(root)
    wider = spec(root, "id INT, name STRING, added BIGINT")
    open_sink(wider, None, "c").check_writable(wider.decode)
    assert pa.schema(DeltaTable(f"{root}/m").schema()).names[-1] == "added"
    for narrower, column in (("id INT, added BIGINT", "name"), ("id INT, name BIGINT, added BIGINT", "name")):
        other = spec(root, narrower)
        with pytest.raises(SchemaEvolutionError, match=f"'{column}'"):
            open_sink(other, None, "c").check_writable(other.decode)


def evolved(mirror: Mirror) -> None:
    """The next plan adds a nullable column: the sink commits the schema change (a commit of no rows)."""
    later = spec(mirror.spec.output_root, "id INT, name STRING, added BIGINT")
    mirror.sink.check_writable(later.decode)


def test_replay_of_the_latest_batch_merges_again_past_the_schema_change_a_later_plan_committed(mirror):
    mirror.sink.publish(None, mirror.stage(1, "a1", mirror.events(("c", 1, "a"), ("c", 2, "b"))))
    events = mirror.events(("u", 1, "A"), ("d", 2, None), ("c", 3, "c"))
    mirror.sink.publish(None, mirror.stage(2, "b1", events))
    evolved(mirror)
    version = mirror.table().version()
    replayed = mirror.stage(2, "b2", events, replay=True)
    mirror.sink.check_replay(UID, replayed.plan)  # before Spark reads the batch again
    mirror.sink.publish(None, replayed)
    table = mirror.table()
    assert table.version() == version + 1 and table.history(1)[0]["kafka-offsets.operation"] == "replay"
    assert "added" in pa.schema(table.schema()).names  # the later plan's column stays
    assert {k: {c: v for c, v in r.items() if c != "added"} for k, r in mirror.rows().items()} == mirror.state
    assert all(r["added"] is None for r in mirror.rows().values())


def test_replay_is_refused_before_spark_when_a_later_commit_changed_rows_and_nothing_is_written(mirror):
    mirror.sink.publish(None, mirror.stage(1, "a1", mirror.events(("c", 1, "a"))))
    evolved(mirror)
    mirror.foreign_append()  # another writer's rows after the batch's merge
    version, rows = mirror.table().version(), mirror.rows()
    plan = BatchPlan("p", 1, 0, (PartitionRange("t", 0, 0, 10, 0),), mirror.sink.location)
    with pytest.raises(
        MergeOperationRefusedError,
        match=r"commits after the batch.s that change its rows \(version \d+, after the batch.s \d+\)",
    ):
        mirror.sink.check_replay(UID, plan)
    assert mirror.table().version() == version and mirror.rows() == rows


def test_an_appending_delta_batch_replays_after_the_schema_change_a_later_plan_committed(tmp_path):
    root = str(tmp_path / "lake")
    appending = build_spec("p", ["t"], root, json_schema="id INT", sink={"format": "delta", "table": "e"})
    sink = open_sink(appending, None, "c")
    assert isinstance(sink, DeltaSink)
    sink.check_writable(appending.decode)
    schema = pa.schema(sink.table().schema())
    plan = BatchPlan("p", 1, 0, (PartitionRange("t", 0, 0, 2, 0),), sink.location)

    def stage(attempt: str) -> str:
        staging = sink.staging_uri("p", 1, attempt)
        fs, path = files.Storage().filesystem(staging)
        fs.create_dir(path, recursive=True)
        pq.write_table(schema.empty_table(), f"{path}/part-00000.parquet")
        return staging

    sink.publish(None, Publication(UID, plan, "a1", stage("a1"), 0, appending.decode))
    later = build_spec("p", ["t"], root, json_schema="id INT, added BIGINT", sink={"format": "delta", "table": "e"})
    sink.check_writable(later.decode)
    version = sink.table().version()
    sink.check_replay(UID, plan)
    sink.publish(None, Publication(UID, plan, "a2", stage("a2"), 0, appending.decode, replay=True))
    assert sink.table().version() == version + 1
    assert [p.split("/")[1] for p in sink._batch_files(sink.table(), 1)] == ["a2"]


def test_a_new_files_delta_stats_hold_its_key_columns_bounds_from_its_footer(tmp_path):
    """What the next batch's rewrite job prunes by: the min, max and null count of each key column whose every
    row group has int or string statistics; other columns and types are left out, the record count is always in."""
    path = tmp_path / "part.parquet"
    table = pa.table(
        {"id": [5, 2, None, 9], "t": ["b", "a", "c", None], "x": [1.5, 2.5, 0.5, 3.0], "d": pa.array([1, 2, 3, 4])}
    )
    pq.write_table(table, path, row_group_size=2)
    stats = json.loads(file_stats(pq.read_metadata(path), ["id", "t", "x", "missing"]))
    assert stats == {
        "numRecords": 4,
        "minValues": {"id": 2, "t": "a"},
        "maxValues": {"id": 9, "t": "c"},
        "nullCount": {"id": 1, "t": 1},
    }
    assert json.loads(file_stats(pq.read_metadata(path), []))["numRecords"] == 4


def test_a_rewrite_job_lists_the_delta_tables_files_with_their_first_key_columns_min_and_max(tmp_path):
    location = str(tmp_path / "t")
    write_deltalake(location, pa.table({"id": [3, 1, 2], "name": ["c", "a", "b"]}))
    write_deltalake(location, pa.table({"id": [10, 12], "name": ["y" * 20, "z"]}), mode="append")
    table = DeltaTable(location)
    job = rewrite_job(table, location, ["id"])
    assert job["base"] == "1"
    assert sorted((f["lower"], f["upper"]) for f in job["files"]) == [(1, 3), (10, 12)]
    assert {f["path"] for f in job["files"]} == {
        files.join(location, p) for p in table.get_add_actions().column("path").to_pylist()
    }
    by_name = sorted((f["lower"], f["upper"]) for f in rewrite_job(table, location, ["name"])["files"])
    assert by_name == [("a", "c"), ("y" * 20, "z")]  # a long lower bound is a prefix: still a bound
