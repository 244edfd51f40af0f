"""Whether a table is still the one the pipeline's committed batches wrote to (core/output_tables.py)."""

from __future__ import annotations

from airflow_kafka_offsets.core.output_tables import (
    RecordedTable,
    recorded_tables,
    table_change,
    table_change_refusal,
)

SEEN = RecordedTable("lake.events", 3, "uuid-a")


def test_the_latest_batch_with_a_uuid_is_recorded_per_table_and_entries_without_one_are_not_checked():
    batches = [
        (4, {"lake.events": {"snapshot_id": 9, "records": 2}}),  # written before uuids were recorded
        (1, {"lake.events": {"snapshot_id": 1, "table_uuid": "uuid-a"}, "lake.other": {"table_uuid": "uuid-o"}}),
        (2, None),
        (3, {"lake.events": {"snapshot_id": 5, "table_uuid": "uuid-a"}}),
    ]
    assert recorded_tables(batches) == {
        "lake.events": RecordedTable("lake.events", 3, "uuid-a"),
        "lake.other": RecordedTable("lake.other", 1, "uuid-o"),
    }
    assert recorded_tables([]) == {}


def test_the_same_uuid_is_the_same_table():
    assert table_change(SEEN, "uuid-a") is None
    assert table_change_refusal("kafka_offsets", SEEN, "uuid-a") is None


def test_a_missing_table_was_dropped_and_another_uuid_replaced_it():
    assert table_change(SEEN, None) == "was dropped"
    assert table_change(SEEN, "uuid-b") == (
        "was replaced by another table of the same name (table uuid uuid-a, now uuid-b)"
    )


def test_the_refusal_names_the_table_the_batch_the_change_and_the_ways_out():
    message = table_change_refusal("iceberg_rest_default", SEEN, None)
    assert message is not None
    assert message.startswith(
        "Iceberg table lake.events (catalog 'iceberg_rest_default') was dropped since batch 3 committed to it"
    )
    assert "Nothing was planned" in message
    for way_out in ("register_table", "reset the pipeline (the reset operation", "a new pipeline (another name)"):
        assert way_out in message
