"""The stack's CDC source settings: the database password only in a private file, never on the command line."""

from __future__ import annotations

import stat
from pathlib import Path

from devstack import cdc


def configured(tmp_path: Path) -> dict:
    secret = tmp_path / "pg-password"
    secret.write_text("s3cret-pw\n")
    stack = {
        "postgres": {"host": "127.0.0.1", "port": 5544, "user": "ako", "password_file": str(secret)},
        "kafka": {"host": "127.0.0.1", "port": 9093},
    }
    return cdc.configure(tmp_path, stack, tmp_path / "libs", 8099)


def properties(path: str) -> dict[str, str]:
    lines = [line for line in Path(path).read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_the_connector_reads_the_stack_database_and_its_password_is_in_a_private_file(tmp_path):
    cfg = configured(tmp_path)
    connector = properties(cfg["connector"])
    assert connector["database.password"] == "s3cret-pw"
    assert stat.S_IMODE(Path(cfg["connector"]).stat().st_mode) == 0o600
    assert (connector["database.hostname"], connector["database.port"], connector["database.dbname"]) == (
        "127.0.0.1",
        "5544",
        "cdc_source",
    )
    assert (connector["plugin.name"], connector["topic.prefix"]) == ("pgoutput", "cdc")
    worker = properties(cfg["worker"])
    assert worker["bootstrap.servers"] == "127.0.0.1:9093"
    assert worker["listeners"] == "http://127.0.0.1:8099"  # loopback only
    assert "s3cret-pw" not in Path(cfg["worker"]).read_text()


def test_the_command_line_names_the_settings_files_and_holds_no_secret(tmp_path):
    argv = cdc._argv(configured(tmp_path))
    assert argv[-3:] == [
        cdc.MAIN,
        str(tmp_path / "cdc" / "worker.properties"),
        str(tmp_path / "cdc" / "connector.properties"),
    ]
    assert not any("s3cret-pw" in part for part in argv)


def test_the_status_answer_says_running_only_when_the_connector_and_a_task_run():
    assert not cdc.running(None)
    assert not cdc.running({"connector": {"state": "RUNNING"}, "tasks": []})
    assert not cdc.running({"connector": {"state": "RUNNING"}, "tasks": [{"state": "FAILED"}]})
    assert cdc.running({"connector": {"state": "RUNNING"}, "tasks": [{"state": "RUNNING"}]})
    assert cdc.topic("orders") == "cdc.public.orders"
