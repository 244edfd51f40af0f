"""The footer reader of Parquet's size statistics (``object_storage.parquet_sizes``) on files Arrow wrote (an
independent writer of the same Thrift): each row group's key + value bytes exactly, nulls and empty values
included; a footer larger than one read; what is not a footer refused by name. And ``Storage.footers``, which
the Spark Connect batch's proof reads, with them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_kafka_offsets.object_storage import parquet_sizes
from airflow_kafka_offsets.object_storage.parquet_sizes import FooterError, read_footer, unencoded_sizes
from airflow_kafka_offsets.object_storage.storage import Storage


def footer_of(path: Path) -> tuple[bytes, list[tuple[int, int]]]:
    """The file's footer and the reads (length, offset) it took."""
    data = path.read_bytes()
    reads: list[tuple[int, int]] = []

    def read_at(length: int, offset: int) -> bytes:
        reads.append((length, offset))
        return data[offset : offset + length]

    return read_footer(len(data), read_at), reads


def batch_table(keys: list[bytes | None], values: list[bytes | None]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["t"] * len(keys), pa.string()),
            "offset": pa.array(range(len(keys)), pa.int64()),
            "flags": pa.array([[True, False]] * len(keys), pa.list_(pa.bool_())),  # a list of booleans skipped
        }
    )


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300)), min_size=1, max_size=80
    ),
    group_size=st.integers(min_value=1, max_value=30),
)
def test_each_row_groups_unencoded_bytes_are_its_values_lengths(
    tmp_path_factory: pytest.TempPathFactory, records: list[tuple[bytes | None, bytes | None]], group_size: int
) -> None:
    path = tmp_path_factory.mktemp("sizes") / "part.parquet"
    keys, values = [k for k, _ in records], [v for _, v in records]
    pq.write_table(batch_table(keys, values), path, row_group_size=group_size)
    footer, _ = footer_of(path)
    groups = [records[i : i + group_size] for i in range(0, len(records), group_size)]
    assert [(g["key"], g["value"], g["topic"], g["offset"]) for g in unencoded_sizes(footer)] == [
        (sum(len(k or b"") for k, _ in g), sum(len(v or b"") for _, v in g), len(g), None) for g in groups
    ]


def test_a_footer_larger_than_the_first_read_takes_a_second(tmp_path: Path) -> None:
    small, large = tmp_path / "small.parquet", tmp_path / "large.parquet"
    table = batch_table([b"k"] * 3, [b"vv"] * 3)
    pq.write_table(table, small)
    pq.write_table(table.replace_schema_metadata({"padding": "x" * 2 * parquet_sizes.TAIL_BYTES}), large)
    for path, reads in ((small, 1), (large, 2)):
        footer, taken = footer_of(path)
        assert len(taken) == reads
        assert [(g["key"], g["value"]) for g in unencoded_sizes(footer)] == [(3, 6)]
        assert pq.read_metadata(pa.BufferReader(parquet_sizes.as_metadata_file(footer))).num_rows == 3


def test_what_is_not_a_parquet_footer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "part.parquet"
    pq.write_table(batch_table([b"k"], [b"v"]), path)
    data = path.read_bytes()
    with pytest.raises(FooterError, match="does not end with PAR1"):
        read_footer(len(data) - 1, lambda length, offset: data[offset : offset + length])
    with pytest.raises(FooterError, match="too short"):
        read_footer(4, lambda length, offset: b"PAR1")
    footer, _ = footer_of(path)
    with pytest.raises(FooterError, match=rf"a truncated Parquet footer \({len(footer) // 2} bytes\)"):
        unencoded_sizes(footer[: len(footer) // 2])


def test_storage_footers_give_the_proof_each_row_groups_statistics_and_bytes(tmp_path: Path) -> None:
    staging = tmp_path / "attempt"
    (staging / "_errors").mkdir(parents=True)
    name = "part-00000-0b5c6f6e-8d8e-4f43-9f0e-2a6b8e1f7c11-c000.zstd.parquet"
    table = batch_table([b"ab", None, b"cde"], [b"x" * 10, b"", None]).append_column("partition", pa.array([2] * 3))
    pq.write_table(table, staging / name, row_group_size=2)
    pq.write_table(table, staging / "_errors" / name)  # a side output: not the batch's data
    assert Storage(None).footers(str(staging)) == [
        {
            "path": name,
            "row_groups": [
                {"records": 2, "payload_bytes": 12, "columns": {"topic": ["t", "t", 0], "offset": [0, 1, 0],
                                                                "partition": [2, 2, 0]}},
                {"records": 1, "payload_bytes": 3, "columns": {"topic": ["t", "t", 0], "offset": [2, 2, 0],
                                                               "partition": [2, 2, 0]}},
            ],
        }
    ]  # fmt: skip
