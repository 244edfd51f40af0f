"""The ledger's connections: psycopg2 with the postgres hook's arguments, or the hook where its features are needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from airflow_kafka_offsets.core.timeouts import LedgerTimeouts
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks.ledger import HOOK_EXTRAS, catalog_uri, driver_arguments


def connection(**extra: object) -> SimpleNamespace:
    return SimpleNamespace(host="db", login="ako", password="p:w@d", schema="ledger", port=5433, extra_dejson=extra)


def test_a_plain_connection_gives_psycopg2_the_hooks_arguments_with_its_libpq_extras_and_the_deadlines() -> None:
    """The extra's deadline wins over the default; the session deadlines are SET by the ledger, never
    passed to libpq (which would refuse an unknown keyword)."""
    assert driver_arguments(
        connection(sslmode="verify-full", connect_timeout="5", statement_timeout=90_000, keepalives_count=7)
    ) == {
        "host": "db",
        "user": "ako",
        "password": "p:w@d",
        "dbname": "ledger",
        "port": 5433,
        "sslmode": "verify-full",
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 7,
        "tcp_user_timeout": 30_000,
    }


@pytest.mark.parametrize("value", ["soon", -1, "2.5", None])
def test_a_deadline_that_is_not_a_whole_number_is_refused_naming_its_key(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"ledger connection extra 'tcp_user_timeout' is .*milliseconds"):
        driver_arguments(connection(tcp_user_timeout=value))


def test_a_statement_deadline_shorter_than_the_lock_wait_is_refused() -> None:
    """A lock wait must end as PipelineBusyError naming the other run, not as a statement timeout."""
    with pytest.raises(ConfigurationError, match="statement_timeout is 60000 ms, not longer than the ledger's lock"):
        LedgerTimeouts(statement_timeout=60_000).check_lock_timeout(60)
    LedgerTimeouts(statement_timeout=0).check_lock_timeout(60)  # 0: no deadline


def test_the_catalog_url_carries_the_deadlines_and_the_urls_own_options_win() -> None:
    from sqlalchemy.engine import make_url

    url = make_url(
        catalog_uri(
            "postgresql://u:p@db:5432/ledger?connect_timeout=4&options=-c%20work_mem%3D64MB",
            LedgerTimeouts(statement_timeout=0),
        )
    )
    assert url.drivername == "postgresql+psycopg2"
    assert url.query["connect_timeout"] == "4"
    assert url.query["tcp_user_timeout"] == "30000"
    assert url.query["keepalives_idle"] == "10"
    assert url.query["options"] == (
        "-c statement_timeout=0 -c idle_in_transaction_session_timeout=300000 -c tcp_keepalives_idle=10 "
        "-c tcp_keepalives_interval=5 -c tcp_keepalives_count=3 -c tcp_user_timeout=30000 -c work_mem=64MB"
    )


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
    out = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()[-3:]
    assert lines[0] == "False"
    assert lines[1].startswith("postgresql+psycopg://127.0.0.1:9?connect_timeout=10&keepalives=1&")
    assert lines[2] == "True"
