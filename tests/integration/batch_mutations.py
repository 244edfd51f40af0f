"""What can go wrong between a batch's Spark write and its proof, done to its staged files: the app must fail
the attempt naming it (``kafka_batch_proof``). Plain Python and pyarrow: applied in this process for a batch
on Spark Connect, and in the spark-submit driver by ``mutating_batch_app.py``.

Each kind works on one Kafka partition of a batch of (at least) three, so all of them can be done at once:

- ``outside``: partition 0's file rewritten with its last record's offset moved to its range's end;
- ``twice``: partition 1's file copied beside it as the same task's next file;
- ``other_attempt``: partition 1's file copied under another write's id (a leftover of another attempt);
- ``missing``: partition 2's file deleted.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq

KINDS = ("outside", "twice", "other_attempt", "missing")


def expected_problems(topic: str, kinds: Iterable[str]) -> dict[str, str]:
    """Per kind, a regular expression of the problem the app's error must name."""
    patterns = {
        "outside": rf"{topic}-0: offsets \[\d+, (\d+)\] outside the planned range \[\d+, \1\)",
        "twice": rf"{topic}-1: part-\d+-[0-9a-f-]+-c000\S* and part-\d+-[0-9a-f-]+-c001\S* overlap in offsets",
        "other_attempt": r"files of 2 writes, not one: part-\S+ of write [0-9a-f-]{36}",
        "missing": r"the files hold (\d+) records but the Kafka read returned (?!\1)\d+",
    }
    return {kind: patterns[kind] for kind in kinds}


def _file_of(staging: Path, partition: int) -> Path:
    for file in sorted(staging.glob("part-*.parquet")):
        values = pq.read_table(file, columns=["partition"]).column("partition").to_pylist()
        if values and values[0] == partition:
            return file
    raise AssertionError(f"no file of partition {partition} in {staging}")


def mutate(job: Mapping[str, Any], kinds: Iterable[str]) -> None:
    """Do ``kinds`` to the files of ``job`` (a local staging location), after its write."""
    staging = Path(urlparse(job["staging_uri"]).path)
    for kind in kinds:
        if kind == "outside":
            file = _file_of(staging, 0)
            table = pq.read_table(file)
            end = next(int(r["end"]) for r in job["ranges"] if int(r["partition"]) == 0)
            offsets = table.column("offset").to_pylist()
            offsets[-1] = end
            index = table.schema.get_field_index("offset")
            pq.write_table(table.set_column(index, "offset", pa.array(offsets, pa.int64())), file)
            file.with_name(f".{file.name}.crc").unlink(missing_ok=True)  # Hadoop's local checksum of the old file
        elif kind == "twice":
            file = _file_of(staging, 1)
            shutil.copy(file, file.with_name(file.name.replace("-c000", "-c001")))
        elif kind == "other_attempt":
            file = _file_of(staging, 1)
            task, write = file.name.split("-", 2)[1], file.name[11:47]
            shutil.copy(file, file.with_name(file.name.replace(f"part-{task}-{write}", f"part-{task}-{uuid.uuid4()}")))
        elif kind == "missing":
            _file_of(staging, 2).unlink()
        else:
            raise ValueError(f"unknown mutation {kind!r}: one of {', '.join(KINDS)}")
