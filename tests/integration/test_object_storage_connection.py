"""The provider's S3 connection type, as Airflow's connection form sees it and as a batch uses it.

The api-server of the shared Airflow deployment answers the form's metadata request (what the
*Admin > Connections* page draws); a batch to the stack's SeaweedFS runs on a connection of the
new type alone: a wrong secret in it is refused before planning, the right one commits the batch.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import pyarrow as pa
import pytest

import devstack
from airflow_kafka_offsets.core.spec import build_spec
from airflow_kafka_offsets.errors import OutputLocationError
from airflow_kafka_offsets.object_storage.connection import CONN_TYPE, FIELDS, HOOK_NAME
from airflow_kafka_offsets.readers import committed_outputs, read_output
from airflow_kafka_offsets.runtime import object_storage

from .helpers import assert_exactly_once, produce, refused
from .pipeline import plan, run_once

pytestmark = pytest.mark.integration


def hook_meta(airflow: dict) -> list[dict]:
    """What the UI's connection form loads: GET /ui/connections/hook_meta."""
    request = urllib.request.Request(
        f"{airflow['url']}/ui/connections/hook_meta",
        headers={"Authorization": f"Bearer {devstack.airflow.token(airflow)}"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_airflows_connection_form_offers_the_type_with_its_fields_and_help(airflow_ui) -> None:
    (meta,) = [m for m in hook_meta(airflow_ui) if m["connection_type"] == CONN_TYPE]
    assert (meta["hook_name"], meta["hook_class_name"]) == (
        HOOK_NAME,
        "airflow_kafka_offsets.hooks.object_storage.ObjectStorageHook",
    )
    standard = meta["standard_fields"]
    assert {name: standard[name]["hidden"] for name in ("host", "port", "url_schema", "login", "password")} == {
        "host": True,
        "port": True,
        "url_schema": True,
        "login": False,
        "password": False,
    }
    assert (standard["login"]["title"], standard["password"]["title"]) == ("Access key ID", "Secret access key")
    assert "instance role" in standard["login"]["placeholder"]
    extra = meta["extra_fields"]
    assert list(extra) == list(FIELDS)
    for key, field in FIELDS.items():
        assert extra[key]["schema"]["title"] == field["label"]
        assert extra[key]["description"] == field["description"]
    assert extra["aws_session_token"]["schema"]["format"] == "password"
    assert extra["addressing_style"]["schema"]["enum"] == ["auto", "path", "virtual"]
    assert extra["addressing_style"]["value"] == "auto"


def form_connection(stack: devstack.StackInfo, secret: str) -> str:
    """The stack's S3 server as the form stores it (no ``aws`` shape anywhere)."""
    creds = stack.s3_credentials()
    extra = {"endpoint_url": creds.endpoint, "region_name": creds.region, "addressing_style": "path"}
    return json.dumps({"conn_type": CONN_TYPE, "login": creds.access_key, "password": secret, "extra": extra})


def test_a_batch_to_s3_runs_on_a_connection_of_the_new_type(
    stack, ledger, make_topic, batches_on_spark_connect, monkeypatch, capfd, caplog
) -> None:
    monkeypatch.setenv("AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID", "lake_form_s3")
    topic = make_topic(partitions=2)
    spec = build_spec("s3form", [topic], f"s3://{stack.s3_bucket}/{uuid.uuid4().hex}/out")
    produced = produce(stack.bootstrap_servers, topic, 90, 2)

    monkeypatch.setenv("AIRFLOW_CONN_LAKE_FORM_S3", form_connection(stack, "not-the-secret"))
    with refused(OutputLocationError, rf"^S3 refused access to bucket '{stack.s3_bucket}'") as refusal:
        plan(ledger, spec, stack)
    assert "not-the-secret" not in str(refusal.value)
    with ledger.transaction() as tx:
        assert tx.fetchall("SELECT count(*) FROM {s}.pipelines") == [(0,)]

    monkeypatch.setenv("AIRFLOW_CONN_LAKE_FORM_S3", form_connection(stack, stack.s3_secret_key))
    done = run_once(ledger, spec, stack)
    assert done is not None and (done.plan.batch_id, done.committed_now, done.records) == (1, True, 90)
    storage = object_storage(spec.output_root)
    outputs = committed_outputs(ledger, spec.name)
    assert [o.batch_id for o in outputs] == [1]
    assert_exactly_once(pa.concat_tables([read_output(o, storage) for o in outputs]).to_pylist(), produced)
    captured = capfd.readouterr()
    assert stack.s3_secret_key not in captured.out + captured.err + caplog.text
    with ledger.transaction() as tx:
        assert stack.s3_secret_key not in json.dumps(tx.fetchall("SELECT * FROM {s}.attempts"), default=str)
