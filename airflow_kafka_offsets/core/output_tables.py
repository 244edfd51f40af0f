"""Is a table still the one the pipeline's committed batches wrote to? (pure: the sink asks the catalog)

Each committed batch's table entry in the ledger (``batches.tables``) records the table's Iceberg
``table-uuid``. A table someone else dropped, or dropped and created again under the same name (a
new uuid), no longer holds those batches: writing on would hide them from every reader while the
ledger says they are committed, so the next plan is refused instead. Entries without a uuid (written
before it was recorded) are not checked; neither are batches committed before the pipeline's latest
reset (a reset is the deliberate way to start writing into a new table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TABLE_UUID = "table_uuid"  # the key of a table entry's uuid in the ledger's batches.tables


@dataclass(frozen=True)
class RecordedTable:
    """The last committed batch that wrote to ``table``, and the table's uuid when it did."""

    table: str
    batch_id: int
    table_uuid: str


def recorded_tables(batches: Iterable[tuple[int, Mapping[str, Any] | None]]) -> dict[str, RecordedTable]:
    """Per table, the latest of ``batches`` (committed ingest batches: id, table entries) with a uuid."""
    found: dict[str, RecordedTable] = {}
    for batch_id, tables in sorted(batches, key=lambda b: b[0]):
        for table, entry in (tables or {}).items():
            if entry.get(TABLE_UUID):
                found[table] = RecordedTable(table, batch_id, str(entry[TABLE_UUID]))
    return found


def table_change(recorded: RecordedTable, current_uuid: str | None) -> str | None:
    """What happened to the table since its recorded batch (None: nothing, it is the same table)."""
    if current_uuid is None:
        return "was dropped"
    if current_uuid != recorded.table_uuid:
        return f"was replaced by another table of the same name (table uuid {recorded.table_uuid}, now {current_uuid})"
    return None


def table_change_refusal(catalog: str, recorded: RecordedTable, current_uuid: str | None) -> str | None:
    """Why the next plan is refused when the table changed (None: it did not), and the ways out."""
    change = table_change(recorded, current_uuid)
    if change is None:
        return None
    return (
        f"Iceberg table {recorded.table} (catalog {catalog!r}) {change} since batch {recorded.batch_id} committed "
        "to it: its readers no longer see the pipeline's committed batches, and writing on would hide them for "
        "good. Nothing was planned. Restore the table (register its last metadata file in the catalog again, "
        "e.g. PyIceberg's register_table), or reset the pipeline (the reset operation: batches committed before "
        "a reset are not checked) to write into a new table from the reset's offsets, or write to another "
        "table with a new pipeline (another name)"
    )
