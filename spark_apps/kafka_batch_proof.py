"""The proof that a batch's written files hold exactly its planned Kafka ranges, from what the write left
behind: each file's Parquet footer and the Kafka read's own count of records per range. No second pass over
the data.

Why the footers suffice: a write task holds the records of one Kafka range (the Kafka scan's input split, read
in offset order; there is no shuffle before the write), so each file holds one Kafka partition, and its
footer's statistics give its record count and its lowest and highest offset. Then:

- a file of another write (another attempt, a stray copy) is caught by its name: Spark names every file a
  write commits ``part-<task>-<write id>...``, with one write id per write;
- a record outside its range, by the footers' offsets;
- a record written twice, by files of a partition in one directory whose offsets overlap, and by the count:
  the files must hold as many records as the Kafka read returned (counted as the write ran, one count for
  the batch: :func:`kafka_batch_check.with_range_metrics`; a count per range costs the write's tasks about
  0.15 CPU s per million records each, the bytes per range the same);
- a file missing, by the same count.

The key + value bytes per partition come from the footers too when the files hold the key and value as read
(Parquet's size statistics, which Spark 4.0 and later write), and otherwise from a sum per range the write takes
as it runs.

Plain Python (standard library only), shared like the contract: the app proves its write with it, and the
package's tests prove the proof. Each footer is a mapping: ``{"path": "<dir>/<name>" relative to the
staging location, "row_groups": [{"records": int, "columns": {column: [min, max, nulls]}, "payload_bytes": int |
None}]}``, only the columns of :data:`FOOTER_COLUMNS` (a missing statistic is None); ``payload_bytes`` are the
group's key + value bytes from Parquet's size statistics, which a raw batch's proof takes instead of a sum the
write computes.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # imported by the package (or the app in Spark Connect mode): a sibling
    from . import kafka_batch_contract as contract
else:  # spark-submit ships it beside the app (--py-files)
    import kafka_batch_contract as contract

# The columns whose statistics the proof reads; the decode error's null count gives the decode errors.
FOOTER_COLUMNS = ("topic", "partition", "offset", "decode_error")
# Spark's name for a file a write task commits: part-<task>-<write id>-c<file of the task>.<extension> (what
# follows the write id is left to the committer: some add a job id of their own).
PART_FILE = re.compile(r"^part-(?P<task>\d+)-(?P<write>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
# The columns whose unencoded bytes (Parquet's size statistics) are a record's key + value bytes.
PAYLOAD_COLUMNS = ("key", "value")
# What the Kafka read returned, counted as the write ran: {"records": int, "payload_bytes": {(topic, partition):
# int}, or None when the files' footers give them}
Read = Mapping[str, Any]


def payload_bytes(sizes: Mapping[str, int | None]) -> int | None:
    """A row group's key + value bytes from its columns' unencoded sizes; None when one is not recorded."""
    found = [sizes.get(column) for column in PAYLOAD_COLUMNS]
    return None if any(size is None for size in found) else sum(int(size or 0) for size in found)


def sizes_recorded(footers: Iterable[Mapping[str, Any]]) -> bool:
    """Whether every row group of records has its key + value bytes (Parquet 1.14 writes them: Spark 4.0+)."""
    groups = (group for footer in footers for group in footer["row_groups"] if int(group["records"]))
    return all(group.get("payload_bytes") is not None for group in groups)


def is_data_file(relative: str) -> bool:
    """A Parquet file of the batch's output, by its path under the staging location, by Spark's own rule for
    what a read skips: not a side output (``_errors/``, ``_changes/``), a commit's leftover (``_temporary/``)
    or a checksum (``.*``); a directory per table or day (``_kafka_offsets_table=<table>``) is output."""
    hidden = (part.startswith(".") or (part.startswith("_") and "=" not in part) for part in relative.split("/"))
    return relative.endswith(".parquet") and not any(hidden)


def _merged(row_groups: Iterable[Mapping[str, Any]], column: str) -> tuple[Any, Any, int | None]:
    """A column's (min, max, nulls) over a file's row groups; min and max None when any group lacks them."""
    lows: list[Any] = []
    highs: list[Any] = []
    nulls: int | None = 0
    for group in row_groups:
        low, high, null = group["columns"].get(column) or (None, None, None)
        if int(group["records"]) - int(null or 0) > 0:  # a group of nulls only has no min or max
            lows.append(low)
            highs.append(high)
        nulls = None if nulls is None or null is None else nulls + int(null)
    if any(value is None for value in lows + highs) or not lows:
        return None, None, nulls
    return min(lows), max(highs), nulls


def prove(
    ranges: Iterable[Mapping[str, Any]], footers: Iterable[Mapping[str, Any]], read: Read, decoding: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """The batch's per-partition summary (the report's ``partitions``) and what is wrong with its files."""
    problems: list[str] = []
    parts: dict[tuple[str, int], dict[str, Any]] = {}
    spans: dict[tuple[str, int, str], list[tuple[int, int, str]]] = defaultdict(list)
    writes: dict[str, list[str]] = defaultdict(list)
    footers = sorted(footers, key=lambda f: str(f["path"]))
    if read.get("payload_bytes") is None and not sizes_recorded(footers):
        problems.append("the files' footers have no size statistics of key and value, and the read counted no bytes")
    for footer in footers:
        path = str(footer["path"])
        named = PART_FILE.match(posixpath.basename(path))
        if named is None:
            problems.append(f"{path}: not a file the batch's write names (part-<task>-<write id>...)")
            continue
        writes[named.group("write")].append(path)
        groups = list(footer["row_groups"])
        records = sum(int(g["records"]) for g in groups)
        if records == 0:
            continue
        topic_low, topic_high, _ = _merged(groups, "topic")
        partition_low, partition_high, _ = _merged(groups, "partition")
        low, high, _ = _merged(groups, "offset")
        if None in (topic_low, partition_low, low):
            problems.append(f"{path}: its footer has no statistics of topic, partition and offset")
            continue
        if (topic_low, partition_low) != (topic_high, partition_high):
            problems.append(
                f"{path}: records of more than one Kafka partition "
                f"({topic_low}-{partition_low} to {topic_high}-{partition_high})"
            )
            continue
        key = (str(topic_low), int(partition_low))
        part = parts.setdefault(key, _empty(key, decoding))
        part["records"] += records
        part["payload_bytes"] += sum(int(g.get("payload_bytes") or 0) for g in groups)
        part["min_offset"] = int(low) if part["min_offset"] is None else min(part["min_offset"], int(low))
        part["max_offset"] = int(high) if part["max_offset"] is None else max(part["max_offset"], int(high))
        if decoding:
            _, _, nulls = _merged(groups, "decode_error")
            part["decode_errors"] += records - int(nulls if nulls is not None else records)
        spans[(*key, posixpath.dirname(path))].append((int(low), int(high), path))
    if len(writes) > 1:
        fewest = min(writes, key=lambda w: (len(writes[w]), w))
        problems.append(f"files of {len(writes)} writes, not one: {', '.join(writes[fewest])} of write {fewest}")
    problems += _overlaps(spans)
    written = sum(int(part["records"]) for part in parts.values())
    if written != int(read["records"]):
        problems.append(f"the files hold {written} records but the Kafka read returned {read['records']}")
    summaries = [parts[key] for key in sorted(parts)]
    for part in summaries:
        # Files of one partition with disjoint offsets (per directory), all of them holding as many records as
        # the read returned (which reads each offset once): as many distinct offsets.
        part["distinct_offsets"] = part["records"]
        if read.get("payload_bytes") is not None:  # else the footers' own (sizes_recorded says they are there)
            part["payload_bytes"] = int(read["payload_bytes"].get((part["topic"], part["partition"]), 0))
    problems += contract.range_problems(ranges, summaries)
    return summaries, problems


def _empty(key: tuple[str, int], decoding: bool) -> dict[str, Any]:
    return {
        "topic": key[0],
        "partition": key[1],
        "records": 0,
        "payload_bytes": 0,
        "min_offset": None,
        "max_offset": None,
        **({"decode_errors": 0} if decoding else {}),
    }


def _overlaps(spans: Mapping[tuple[str, int, str], list[tuple[int, int, str]]]) -> list[str]:
    """Files of one partition in one directory whose offsets overlap: a record there twice."""
    problems = []
    for (topic, partition, _), files in sorted(spans.items()):
        files = sorted(files)
        for (_, high, path), (low, next_high, next_path) in itertools.pairwise(files):
            if low <= high:
                problems.append(
                    f"{topic}-{partition}: {path} and {next_path} overlap in offsets [{low}, {min(high, next_high)}]"
                )
    return problems
