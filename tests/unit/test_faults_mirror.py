"""The fault harness's check of a mirror table (``--sink iceberg-merge|delta-merge``): the state its changes
leave, and each way a mirror can differ from it."""

from __future__ import annotations

import pytest

from faults_harness.records import mirror_state
from faults_harness.verify import Verdict, check_mirror

# (id, partition, offset, n): n None is a tombstone
CHANGES = [
    ("a", 0, 0, 1),
    ("b", 1, 0, 2),
    ("a", 0, 1, 3),  # a's new value
    ("c", 1, 1, 4),
    ("b", 1, 2, None),  # b deleted
    ("c", 1, 3, 5),
]
PRODUCED = [{"id": i, "partition": p, "offset": o, "n": n} for i, p, o, n in CHANGES]


def row(rid: str, n: int, partition: int, offset: int) -> dict:
    return {"id": rid, "n": n, "_kafka_partition": partition, "_kafka_offset": offset}


MIRROR = [row("a", 3, 0, 1), row("c", 5, 1, 3)]


def test_the_state_is_each_keys_last_change_by_kafka_order_less_deletes():
    shuffled = list(reversed(PRODUCED))  # acknowledgments come in any order
    assert {k: (c["n"], c["offset"]) for k, c in mirror_state(shuffled).items()} == {"a": (3, 1), "c": (5, 3)}


def test_a_mirror_equal_to_the_state_passes():
    verdict = Verdict()
    check_mirror(MIRROR, PRODUCED, verdict, drained=True)
    assert verdict.ok and (verdict.lost, verdict.duplicated, verdict.unexpected, verdict.differing) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("rows", "counts"),
    [
        ([row("a", 3, 0, 1)], (1, 0, 0, 0)),  # c lost
        ([*MIRROR, row("c", 5, 1, 3)], (0, 1, 0, 0)),  # c twice
        ([*MIRROR, row("b", 2, 1, 0)], (0, 0, 1, 0)),  # a deleted key still there
        ([row("a", 1, 0, 0), row("c", 5, 1, 3)], (0, 0, 0, 1)),  # a's older value
        ([row("a", 3, 0, 1), row("c", 5, 1, 1)], (0, 0, 0, 1)),  # c's value from another offset
    ],
)
def test_each_difference_fails_the_trial(rows, counts):
    verdict = Verdict()
    check_mirror(rows, PRODUCED, verdict, drained=True)
    assert (verdict.lost, verdict.duplicated, verdict.unexpected, verdict.differing) == counts
    assert not verdict.ok
