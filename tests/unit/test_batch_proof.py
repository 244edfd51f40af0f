"""The proof of a batch's files from their footers and the Kafka read's counts (``kafka_batch_proof``), on
footers as the runtimes read them: every way a write can go wrong that the proof must catch, and the layouts
(several tasks per partition, a directory per day or table, files rolled over, row groups, gaps in offsets)
it must accept. The same proof on footers Spark wrote: tests/integration/test_batch_proof_spark.py."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kafka_offsets.spark_apps import kafka_batch_proof as proof

WRITE = "0b5c6f6e-8d8e-4f43-9f0e-2a6b8e1f7c11"
OTHER_WRITE = "9f1d2c3b-4a5e-4f60-8a7b-1c2d3e4f5a6b"
RANGES = [
    {"topic": "t", "partition": 0, "start": 100, "end": 200},
    {"topic": "t", "partition": 1, "start": 0, "end": 50},
]


def group(records: int, low: int, high: int, partition: int = 0, topic: str = "t", errors: int = 0) -> dict[str, Any]:
    return {
        "records": records,
        "columns": {
            "topic": [topic, topic, 0],
            "partition": [partition, partition, 0],
            "offset": [low, high, 0],
            "decode_error": ["bad", "bad", records - errors] if errors else [None, None, records],
        },
    }


def footer(task: int, *groups: dict[str, Any], directory: str = "", write: str = WRITE, n: int = 0) -> dict[str, Any]:
    name = f"part-{task:05d}-{write}-c{n:03d}.zstd.parquet"
    return {"path": f"{directory}/{name}" if directory else name, "row_groups": list(groups)}


def counts(records: int, **bytes_per_partition: int) -> dict[str, Any]:
    return {"records": records, "payload_bytes": {("t", int(p[1:])): b for p, b in bytes_per_partition.items()}}


# A good write: partition 0 read in two tasks (100-149, 150-199, with a gap of markers at 120-121 and 199),
# partition 1 in one task; 150 records.
GOOD = [
    footer(0, group(48, 100, 149)),
    footer(1, group(49, 150, 198)),
    footer(2, group(50, 0, 49, partition=1)),
]
GOOD_COUNTS = counts(147, p0=9700, p1=500)


def problems(footers: list[dict[str, Any]], counted: dict = GOOD_COUNTS, ranges: list = RANGES) -> list[str]:
    return proof.prove(ranges, footers, counted)[1]


def test_a_good_write_is_summarized_per_partition_with_the_reads_bytes() -> None:
    partitions, found = proof.prove(RANGES, GOOD, GOOD_COUNTS)
    assert found == []
    assert partitions == [
        {"topic": "t", "partition": 0, "records": 97, "min_offset": 100, "max_offset": 198, "distinct_offsets": 97,
         "payload_bytes": 9700},
        {"topic": "t", "partition": 1, "records": 50, "min_offset": 0, "max_offset": 49, "distinct_offsets": 50,
         "payload_bytes": 500},
    ]  # fmt: skip


def test_a_partition_written_twice_is_caught_by_overlapping_files_and_by_the_count() -> None:
    twice = [*GOOD, footer(2, group(50, 0, 49, partition=1), n=1)]
    assert problems(twice) == [
        f"t-1: part-00002-{WRITE}-c000.zstd.parquet and part-00002-{WRITE}-c001.zstd.parquet"
        " overlap in offsets [0, 49]",
        "the files hold 197 records but the Kafka read returned 147",
        "t-1: 100 records exceed the planned span 50",
    ]


def test_a_copy_in_another_directory_is_caught_by_the_count() -> None:
    """Files of one partition in different directories (days, tables) may interleave; the count still adds up."""
    by_day = [
        footer(2, group(30, 0, 49, partition=1), directory="d=1"),
        footer(2, group(20, 1, 48, partition=1), directory="d=2"),
    ]
    assert problems([*GOOD[:2], *by_day]) == []
    copied = [*by_day, footer(2, group(20, 1, 48, partition=1), directory="d=3")]
    assert problems([*GOOD[:2], *copied]) == [
        "the files hold 167 records but the Kafka read returned 147",
        "t-1: 70 records exceed the planned span 50",
    ]


def test_a_missing_file_is_caught_by_the_count() -> None:
    assert problems(GOOD[1:]) == ["the files hold 99 records but the Kafka read returned 147"]
    assert problems(GOOD[:2]) == ["the files hold 97 records but the Kafka read returned 147"]


def test_a_file_of_another_attempts_write_is_named_as_such() -> None:
    stray = footer(7, group(3, 0, 2, partition=1), write=OTHER_WRITE)
    assert problems([GOOD[0], GOOD[1], GOOD[2], stray]) == [
        f"files of 2 writes, not one: part-00007-{OTHER_WRITE}-c000.zstd.parquet of write {OTHER_WRITE}",
        f"t-1: part-00007-{OTHER_WRITE}-c000.zstd.parquet and part-00002-{WRITE}-c000.zstd.parquet"
        " overlap in offsets [0, 2]",
        "the files hold 150 records but the Kafka read returned 147",
        "t-1: 53 records exceed the planned span 50",
    ]
    # the other write's file in place of this one's: same records, still not this write's
    replaced = [GOOD[0], GOOD[1], footer(2, group(50, 0, 49, partition=1), write=OTHER_WRITE)]
    assert problems(replaced) == [
        f"files of 2 writes, not one: part-00002-{OTHER_WRITE}-c000.zstd.parquet of write {OTHER_WRITE}"
    ]


def test_a_file_spark_did_not_name_is_refused() -> None:
    assert problems([*GOOD, {"path": "copy.parquet", "row_groups": [group(1, 0, 0, partition=1)]}]) == [
        "copy.parquet: not a file the batch's write names (part-<task>-<write id>...)"
    ]


@pytest.mark.parametrize(
    ("low", "high", "problem"),
    [
        (99, 198, "t-0: offsets [99, 198] outside the planned range [100, 200)"),
        (100, 200, "t-0: offsets [100, 200] outside the planned range [100, 200)"),
    ],
)
def test_a_record_outside_its_range_is_caught_by_the_footers_offsets(low: int, high: int, problem: str) -> None:
    moved = [footer(0, group(48, low, 149)), footer(1, group(49, 150, high)), GOOD[2]]
    assert problems(moved) == [problem]


def test_a_partition_not_in_the_plan_is_refused() -> None:
    other = footer(3, group(5, 0, 4, partition=9))
    assert problems([*GOOD, other]) == [
        "the files hold 152 records but the Kafka read returned 147",
        "t-9: 5 records from a partition not in the plan",
    ]


def test_a_file_of_two_partitions_or_without_statistics_is_refused() -> None:
    mixed = {
        "path": f"part-00000-{WRITE}-c000.zstd.parquet",
        "row_groups": [group(48, 100, 149), group(1, 0, 0, partition=1)],
    }
    assert problems([mixed, GOOD[1], GOOD[2]])[0] == (
        f"part-00000-{WRITE}-c000.zstd.parquet: records of more than one Kafka partition (t-0 to t-1)"
    )
    bare = footer(
        0, {"records": 48, "columns": {"topic": [None, None, None], "partition": [0, 0, 0], "offset": [100, 149, 0]}}
    )
    assert problems([bare, GOOD[1], GOOD[2]])[0] == (
        f"part-00000-{WRITE}-c000.zstd.parquet: its footer has no statistics of topic, partition and offset"
    )


def test_row_groups_and_rolled_over_files_of_one_task_add_up() -> None:
    rolled = [footer(0, group(20, 100, 119), group(28, 122, 149)), footer(0, group(49, 150, 198), n=1), GOOD[2]]
    partitions, found = proof.prove(RANGES, rolled, GOOD_COUNTS)
    assert found == [] and partitions[0]["records"] == 97 and partitions[0]["max_offset"] == 198


def test_empty_files_and_an_empty_batch_prove_nothing_wrong() -> None:
    empty = footer(5, {"records": 0, "columns": {}})
    assert problems([*GOOD, empty]) == []
    assert proof.prove(RANGES, [empty], counts(0)) == ([], [])


def test_decode_errors_are_the_records_with_a_decode_error() -> None:
    decoded = [footer(0, group(48, 100, 149, errors=2)), footer(1, group(49, 150, 198)), GOOD[2]]
    partitions, found = proof.prove(RANGES, decoded, GOOD_COUNTS, decoding=True)
    assert found == [] and [p["decode_errors"] for p in partitions] == [2, 0]


def test_only_the_batchs_data_files_are_proved() -> None:
    assert proof.is_data_file("part-00000-x.parquet") and proof.is_data_file("_kafka_offsets_table=a/part-0.parquet")
    assert proof.is_data_file("timestamp_date=2026-01-01/part-0.parquet")
    for side in ("_errors/p.parquet", "_changes/p.parquet", "_temporary/0/p.parquet", ".p.parquet.crc", "_SUCCESS"):
        assert not proof.is_data_file(side)


def sized(g: dict[str, Any], payload: int | None) -> dict[str, Any]:
    return {**g, "payload_bytes": payload}


def test_without_the_reads_bytes_each_partitions_bytes_are_its_footers_size_statistics() -> None:
    footers = [
        footer(0, sized(group(20, 100, 119), 2000), sized(group(28, 122, 149), 2800)),
        footer(1, sized(group(49, 150, 198), 4900)),
        footer(2, sized(group(50, 0, 49, partition=1), 500)),
        footer(3, sized({"records": 0, "columns": {}}, None)),  # an empty file records nothing
    ]
    partitions, found = proof.prove(RANGES, footers, {"records": 147, "payload_bytes": None})
    assert found == []
    assert [(p["partition"], p["records"], p["payload_bytes"]) for p in partitions] == [(0, 97, 9700), (1, 50, 500)]
    # the read's own sums, when it took them, are the ledger's
    partitions, _ = proof.prove(RANGES, footers, GOOD_COUNTS)
    assert [p["payload_bytes"] for p in partitions] == [9700, 500]


def test_footers_without_size_statistics_prove_no_bytes_when_the_read_counted_none() -> None:
    footers = [footer(0, sized(group(48, 100, 149), None)), *GOOD[1:]]
    assert not proof.sizes_recorded(footers)
    assert proof.sizes_recorded([footer(0, sized(group(48, 100, 149), 4800))])
    assert problems(footers, {"records": 147, "payload_bytes": None}) == [
        "the files' footers have no size statistics of key and value, and the read counted no bytes"
    ]
    assert problems(footers) == []  # the read's sums stand in


def test_a_row_groups_bytes_are_its_key_and_values_unencoded_sizes() -> None:
    assert proof.payload_bytes({"key": 10, "value": 90, "offset": None}) == 100
    assert proof.payload_bytes({"key": 0, "value": 5}) == 5
    assert proof.payload_bytes({"key": None, "value": 5}) is None
    assert proof.payload_bytes({"value": 5}) is None
