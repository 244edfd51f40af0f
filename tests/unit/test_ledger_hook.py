"""The ledger's connections: psycopg2 with the postgres hook's arguments, or the hook where its features are needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from airflow_kafka_offsets.hooks.ledger import HOOK_EXTRAS, driver_arguments


def connection(**extra: object) -> SimpleNamespace:
    return SimpleNamespace(host="db", login="ako", password="p:w@d", schema="ledger", port=5433, extra_dejson=extra)


def test_a_plain_connection_gives_psycopg2_the_hooks_arguments_with_its_libpq_extras() -> None:
    assert driver_arguments(connection(sslmode="verify-full", connect_timeout=5)) == {
        "host": "db",
        "user": "ako",
        "password": "p:w@d",
        "dbname": "ledger",
        "port": 5433,
        "sslmode": "verify-full",
        "connect_timeout": 5,
    }


@pytest.mark.parametrize("extra", sorted(HOOK_EXTRAS))
def test_a_connection_that_needs_the_postgres_hooks_own_features_is_left_to_it(extra: str) -> None:
    assert driver_arguments(connection(**{extra: "x"})) is None


def test_opening_the_ledger_does_not_load_the_postgres_hook_until_a_sink_asks_for_the_catalog() -> None:
    """Its module loads psycopg 3 and common-sql: about 100 ms of every plan and commit task."""
    code = (
        "import sys\n"
        "from airflow_kafka_offsets.hooks.ledger import LedgerHook\n"
        "ledger = LedgerHook('pg').get_conn(migrate=False)\n"
        "print('airflow.providers.postgres.hooks.postgres' in sys.modules)\n"
        "print(ledger.catalog_uri)\n"
        "print('airflow.providers.postgres.hooks.postgres' in sys.modules)\n"
    )
    env = {**os.environ, "AIRFLOW_CONN_PG": json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": 9})}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()[-3:]
    assert lines[0] == "False"
    assert lines[1].endswith("://127.0.0.1:9")
    assert lines[2] == "True"
