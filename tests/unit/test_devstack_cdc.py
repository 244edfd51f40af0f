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


def test_the_avro_connectors_write_the_confluent_wire_format_and_keep_the_registry_password_private(tmp_path):
    registry_secret = tmp_path / "schema-registry-password"
    registry_secret.write_text("r3gistry-pw\n")
    secret = tmp_path / "pg-password"
    secret.write_text("s3cret-pw\n")
    stack = {
        "postgres": {"host": "127.0.0.1", "port": 5544, "user": "ako", "password_file": str(secret)},
        "kafka": {"host": "127.0.0.1", "port": 9093},
        "schema_registry": {"host": "127.0.0.1", "port": 8088, "user": "ako", "password_file": str(registry_secret)},
    }
    cfg = cdc.configure(tmp_path, stack, tmp_path / "libs", 8099, tmp_path / "plugins")
    assert properties(cfg["worker"])["plugin.path"] == str(tmp_path / "plugins")
    assert cdc.connectors(cfg) == ["ako-cdc", "ako-cdc-avro", "ako-cdc-avro-jsonkey"]
    avro_key, json_key = (properties(path) for path in cfg["avro_connectors"])
    for connector, prefix in ((avro_key, "cdcavro"), (json_key, "cdcjk")):
        assert connector["topic.prefix"] == prefix and connector["slot.name"] == f"ako_cdc_{prefix}"
        assert connector["value.converter"] == cdc.AVRO_CONVERTER
        assert connector["value.converter.apicurio.registry.url"] == "http://127.0.0.1:8088/apis/registry/v2"
        assert connector["value.converter.apicurio.registry.as-confluent"] == "true"
        assert connector["value.converter.apicurio.registry.use-id"] == "contentId"
        assert connector["value.converter.apicurio.registry.headers.enabled"] == "false"
        assert connector["value.converter.apicurio.auth.password"] == "r3gistry-pw"
    assert avro_key["key.converter"] == cdc.AVRO_CONVERTER and json_key["key.converter"] == cdc.JSON_CONVERTER
    assert json_key["table.include.list"] == "public.jsonkey_.*"
    for path in cfg["avro_connectors"]:
        assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    argv = cdc._argv(cfg)
    assert argv[-2:] == cfg["avro_connectors"]
    assert not any("r3gistry-pw" in part or "s3cret-pw" in part for part in argv)
    assert "r3gistry-pw" not in Path(cfg["worker"]).read_text()
    assert cdc.topic("orders", prefix="cdcavro") == "cdcavro.public.orders"
