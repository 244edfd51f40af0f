"""The fault harness's README against its code: a row for every fault kind, and the network kinds'
bounds and settings as the code has them."""

from __future__ import annotations

import re
from pathlib import Path

from faults_harness import bounded, network_kinds, service_links
from faults_harness.kinds import KINDS

README = Path(network_kinds.__file__).with_name("README.md").read_text()


def test_every_fault_kind_has_its_row() -> None:
    rows = set(re.findall(r"^\| `([a-z0-9_]+)` \|", README, re.MULTILINE))
    assert set(KINDS) <= rows


def test_the_network_kinds_settings_are_the_codes() -> None:
    row = {
        kind: next(line for line in README.splitlines() if line.startswith(f"| `{kind}` |"))
        for kind in network_kinds.NETWORK_KINDS
    }
    assert f"`idle_in_transaction_session_timeout` {network_kinds.LEDGER_IDLE_MS} ms" in row["ledger_blackhole"]
    assert f"within {network_kinds.LEDGER_BOUND_S:.0f} s" in row["ledger_blackhole"]
    assert f"{bounded.KAFKA_LATENCY_MS} ms of latency" in row["kafka_cut"]
    assert f"slowed by {network_kinds.LEDGER_LATENCY_MS} ms each way" in row["slow_ledger"]
    assert f"attempt lease of {network_kinds.LEASE_S} s" in row["slow_ledger"]
    assert f"{network_kinds.READ_BOUND_S:.0f} s after a cut or reset" in README
    hold = "-".join(f"{s:.0f}" for s in service_links.S3_HOLD_S)
    assert f"for {hold} s, then healed" in row["s3_blackhole"]
    assert f"within {service_links.S3_BOUND_S:.0f} s" in row["s3_blackhole"]
    assert f"within {service_links.REGISTRY_BOUND_S:.0f} s" in row["registry_cut"]
    assert f"fail within {network_kinds.KAFKA_SILENT_BOUND_S:.0f} s" in row["kafka_blackhole"]
    assert f"fail within {network_kinds.CONNECT_SILENT_BOUND_S:.0f} s" in row["connect_blackhole"]
    for low, high in network_kinds.CONNECT_RESETS.values():
        assert f"for {low:g}-{high:g} s" in row["connect_reset"]
