"""Merge mode: a table that mirrors its source's current rows, from change events on a topic.

What a sink in merge mode takes (:class:`MergeSpec`) and what a batch of change events does to
the mirror, as plain Python: :func:`changes_of` turns one event into the keyed changes it makes
(one, or two for an update that changes the key), :func:`last_changes` keeps the last change per
key in Kafka order, :func:`applied` applies them to rows. The Spark app computes the same with
Spark SQL (``spark_apps/kafka_batch_changes.py``) and the table sinks apply its change set (Iceberg
with a copy-on-write overwrite, Delta with a MERGE); these functions are the rules they follow, small
enough to test case by case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_kafka_offsets.core.ddl import parse_ddl
from airflow_kafka_offsets.core.debezium import envelope_row_ddl
from airflow_kafka_offsets.errors import InvalidPipelineSpecError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import (
    CHANGE_OP,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    SOURCE_POSITION,
    SOURCE_TS_MS,
)

# The columns a mirror's rows carry beside the source's: where the row's last change came from.
MIRROR_COLUMNS = (KAFKA_PARTITION, KAFKA_OFFSET, SOURCE_POSITION, SOURCE_TS_MS, CHANGE_OP)


class ChangeFormat(str, Enum):
    """How a topic's records describe changes.

    ``debezium``: Debezium's envelope (``op`` c/u/d/r, ``before``, ``after``, ``source``), as JSON with
    or without the embedded schema, or Avro through a schema registry; the tombstone after a delete changes
    nothing more.
    ``upsert``: the value is the row (latest value per key, a compacted topic's producer); a
    tombstone (null value) deletes the row whose key is the record key.
    """

    DEBEZIUM = "debezium"
    UPSERT = "upsert"


@dataclass(frozen=True)
class MergeSpec:
    """The mirror's key columns (of the decoded row) and the topic's change format."""

    key: tuple[str, ...]
    changes: ChangeFormat

    def to_json(self) -> dict[str, Any]:
        """As the sink options store it."""
        return {"merge_key": list(self.key), "changes": self.changes.value}

    def job_json(self) -> dict[str, Any]:
        """What the Spark app is told (the job file's ``merge``)."""
        return {"key": list(self.key), "changes": self.changes.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MergeSpec | None:
        if not data.get("merge_key"):
            return None
        return cls(tuple(data["merge_key"]), ChangeFormat(data.get("changes") or ChangeFormat.DEBEZIUM.value))


def row_ddl(decoded_ddl: str, changes: ChangeFormat, avro: bool) -> str:
    """The source row's columns (Spark DDL): a JSON pipeline's json_schema names them; an Avro Debezium
    pipeline's decoded value is the envelope, whose ``after`` record is the row."""
    return envelope_row_ddl(decoded_ddl) if avro and changes is ChangeFormat.DEBEZIUM else decoded_ddl


def check_row(pipeline: str, key: Sequence[str], row: str, named_by: str) -> None:
    """Refuse a row (Spark DDL) without a key column or with a column named like the mirror's own;
    ``named_by`` says where the row's columns come from (the json_schema, a reader schema)."""
    columns = [f.name for f in parse_ddl(row)]
    missing = [k for k in key if k not in columns]
    if missing:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: merge_key column(s) {', '.join(missing)} are not in {named_by} "
            f"({', '.join(columns)})"
        )
    reserved = sorted(set(columns) & set(MIRROR_COLUMNS))
    if reserved:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: {named_by}'s column(s) {', '.join(reserved)} are the mirror's own "
            "columns; rename them"
        )


@dataclass(frozen=True)
class Event:
    """One Kafka record, decoded: ``op`` c/u/d/r with ``before``/``after`` (Debezium), or (upsert)
    ``after`` the value and ``record_key`` the key; ``tombstone`` when the value is null."""

    partition: int
    offset: int
    op: str | None = None
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None
    record_key: Mapping[str, Any] | None = None
    tombstone: bool = False
    position: str | None = None
    ts_ms: int | None = None


@dataclass(frozen=True)
class Change:
    """What an event does to one key: ``row`` is the row now (None: the key is deleted).
    ``order`` ranks the changes of one event: a key change's delete comes before its insert."""

    key: tuple[Any, ...]
    row: Mapping[str, Any] | None
    partition: int
    offset: int
    order: int
    op: str
    position: str | None
    ts_ms: int | None

    @property
    def deleted(self) -> bool:
        return self.row is None


def _key(image: Mapping[str, Any] | None, key: Sequence[str]) -> tuple[Any, ...] | None:
    """The key of a row image; None when the image is missing or lacks a key column."""
    if image is None:
        return None
    values = tuple(image.get(k) for k in key)
    return None if any(v is None for v in values) else values


def changes_of(event: Event, key: Sequence[str], changes: ChangeFormat) -> list[Change]:
    """The changes one event makes, in the order they apply (empty: it changes nothing).

    Debezium: c, r (a snapshot read) and u put ``after``; d deletes ``before``'s key; an update
    whose ``before`` has another key deletes that key first; a tombstone changes nothing (the
    delete before it did). Upsert: the value is the row; a tombstone deletes the record key's row.
    """

    def change(k: tuple[Any, ...], row: Mapping[str, Any] | None, order: int, op: str) -> Change:
        return Change(k, row, event.partition, event.offset, order, op, event.position, event.ts_ms)

    if changes is ChangeFormat.UPSERT:
        if event.tombstone:
            k = _key(event.record_key, key)
            return [] if k is None else [change(k, None, 1, "d")]
        k = _key(event.after, key)
        return [] if k is None or event.after is None else [change(k, event.after, 1, "u")]
    if event.tombstone or event.op not in ("c", "u", "d", "r"):
        return []
    if event.op == "d":
        k = _key(event.before, key)
        return [] if k is None else [change(k, None, 1, "d")]
    new = _key(event.after, key)
    if new is None or event.after is None:
        return []
    old = _key(event.before, key) if event.op == "u" else None
    moved = [change(old, None, 0, "d")] if old is not None and old != new else []
    return [*moved, change(new, event.after, 1, event.op)]


def last_changes(events: Iterable[Event], key: Sequence[str], changes: ChangeFormat) -> dict[tuple[Any, ...], Change]:
    """The last change per key by Kafka order (offset within a partition; a key's events share one)."""
    found: dict[tuple[Any, ...], Change] = {}
    for event in events:
        for c in changes_of(event, key, changes):
            current = found.get(c.key)
            if current is None or (c.offset, c.order, c.partition) > (current.offset, current.order, current.partition):
                found[c.key] = c
    return found


def applied(
    rows: Mapping[tuple[Any, ...], Mapping[str, Any]], changes: Mapping[tuple[Any, ...], Change]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """``rows`` (by key) after a batch's last changes: a deleted key goes, a put key holds its new row
    with where it came from."""
    result = {k: dict(v) for k, v in rows.items() if k not in changes}
    for k, c in changes.items():
        if c.row is not None:
            result[k] = {
                **c.row,
                KAFKA_PARTITION: c.partition,
                KAFKA_OFFSET: c.offset,
                SOURCE_POSITION: c.position,
                SOURCE_TS_MS: c.ts_ms,
                CHANGE_OP: c.op,
            }
    return result


def replay_refusal(pipeline: str, batch_id: int, latest: int | None) -> str:
    """Why a committed batch of a mirror other than the latest does not replay: its changes were applied on
    the state the batches before it left and later ones build on it; only the latest is merged again, on
    the state before it."""
    return (
        f"pipeline {pipeline!r} merges changes into a mirror table: batch {batch_id} is applied on the state "
        f"earlier batches left and later ones build on it, so only the latest batch ({latest}) replays. To "
        "rebuild the mirror, start a new pipeline (another name and table) from the topic's start, or have the "
        "source send a fresh snapshot (Debezium: an incremental snapshot)"
    )


def rewind_refusal(pipeline: str, rewound: Sequence[str]) -> str:
    """Why a mirror's cursors do not move backwards: the rewound changes are already in the table."""
    return (
        f"pipeline {pipeline!r} merges changes into a mirror table: rewinding {', '.join(rewound)} would apply "
        "changes the table already holds again, over newer ones. A mirror's reset may only skip forward; to "
        "rebuild it, start a new pipeline (another name and table)"
    )
