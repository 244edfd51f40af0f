"""A ledger too slow to open a connection, through the stack's toxiproxy: the commit try fails within its
``connect_timeout`` (set small through the connection's extra) with ``LedgerUnreachableError`` naming the
ledger's host:port, the deadline and its key, never the driver's raw ``OperationalError`` or the password;
the batch stays planned, and once the link heals the next try commits it exactly once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import devstack
from airflow_kafka_offsets.core.actor import Actor
from airflow_kafka_offsets.errors import LedgerUnreachableError
from airflow_kafka_offsets.hooks.ledger import LedgerHook
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.service.commit import commit_batch
from devstack.toxiproxy_api import Client, both_ways

from .test_silent_ledger import OFFSETS, planned_and_read

# Serial: it slows the stack's fault proxy in front of PostgreSQL, which test_network_faults.py cuts too,
# and bounds the failed try in seconds.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

CONNECT_TIMEOUT_S = 2  # libpq's smallest useful value
LATENCY_MS = 3000  # each way: the handshake's first answer comes after the connect timeout
SLOW = Actor.from_json({"worker": "slow-link"})


def batch_rows(ledger: Ledger) -> list[tuple]:
    with ledger.transaction() as tx:
        return tx.fetchall("SELECT batch_id, state FROM {s}.batches WHERE pipeline = %s", ("silent",))


def test_a_ledger_too_slow_to_connect_fails_the_try_naming_it_and_the_healed_retry_commits_once(
    stack, ledger: Ledger, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, batch_id = planned_and_read(ledger, tmp_path)
    proxied = devstack.start_toxiproxy()
    links = Client(proxied.api_url)
    links.reset()
    connection = json.loads(proxied.env["AIRFLOW_CONN_POSTGRES_DEFAULT"])
    connection["extra"] = {**connection.get("extra", {}), "connect_timeout": CONNECT_TIMEOUT_S}
    monkeypatch.setenv("AIRFLOW_CONN_LEDGER_PROXIED", json.dumps(connection))
    through = LedgerHook("ledger_proxied", schema=schema).get_conn(migrate=False)
    address = f"{connection['host']}:{connection['port']}"
    try:
        for toxic in both_ways("slow", "latency", latency=LATENCY_MS):
            links.add("postgres", toxic)
        started = time.monotonic()
        with pytest.raises(LedgerUnreachableError) as raised:
            commit_batch(through, sink, "silent", batch_id, SLOW)
        took = time.monotonic() - started
    finally:
        links.reset()
    message = str(raised.value)
    print(f"slow ledger: the commit try failed {took:.2f}s after it started: {message}")
    assert message.startswith(
        f"could not open a connection to the ledger database at {address} within connect_timeout "
        f"{CONNECT_TIMEOUT_S} s (the ledger connection extra's key connect_timeout): the host did not answer in time"
    )
    assert message.endswith(
        "nothing was read or written: check that PostgreSQL is up and reachable from this worker, or raise "
        "connect_timeout for a slow link, then retry the task"
    )
    assert "timeout expired" in message and connection["password"] not in message
    assert CONNECT_TIMEOUT_S - 0.5 < took < CONNECT_TIMEOUT_S + 8  # the deadline, not the OS's, on a loaded machine
    assert batch_rows(ledger) == [(batch_id, "planned")]
    assert ledger.cursors("silent") == {tp: o.earliest for tp, o in OFFSETS.items()}

    healed = commit_batch(through, sink, "silent", batch_id, SLOW)  # the retry, on the healed link
    assert healed.committed_now
    assert commit_batch(through, sink, "silent", batch_id, SLOW).committed_now is False  # a third try: nothing
    assert batch_rows(ledger) == [(batch_id, "committed")]
    assert ledger.batch("silent", batch_id).committed_by == SLOW
    assert ledger.cursors("silent") == {tp: o.latest for tp, o in OFFSETS.items()}
    assert ledger.contiguity_problems("silent") == []
