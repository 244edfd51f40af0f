"""The stack's schema registry (Apicurio Registry's Confluent-compatible API) through the package's
SchemaRegistryHook and confluent-kafka's own client and Avro serializer: three BACKWARD-compatible
versions of a subject, records in the Confluent wire format on the stack's Kafka whose schema ids
resolve to their writer schemas (also after a registry restart), an incompatible change refused."""

from __future__ import annotations

import io
import json
import logging
import uuid
from typing import Any

import fastavro
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

import devstack
from airflow_kafka_offsets.hooks.schema_registry import SchemaRegistryHook

pytestmark = pytest.mark.integration

BASE_FIELDS: list[dict[str, Any]] = [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]
# Each version adds an optional field (a union with null, default null): BACKWARD compatible, a reader of
# the newest version reads records of every older one.
ADDED_FIELDS: list[dict[str, Any]] = [
    {"name": "currency", "type": ["null", "string"], "default": None},
    {"name": "note", "type": ["null", "string"], "default": None},
]
# A new field without a default: a reader of this version cannot read older records.
REQUIRED_FIELD = {"name": "customer", "type": "string"}


def order_schema(*extra_fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Order", "namespace": "ako.test", "fields": [*BASE_FIELDS, *extra_fields]}


VERSIONS = [order_schema(*ADDED_FIELDS[:n]) for n in range(3)]
RECORDS = [  # two per writer version, each with the fields of its version
    {"id": 1, "amount": 1.5},
    {"id": 2, "amount": 2.5},
    {"id": 3, "amount": 3.5, "currency": "EUR"},
    {"id": 4, "amount": 4.5, "currency": None},
    {"id": 5, "amount": 5.5, "currency": "USD", "note": "gift"},
    {"id": 6, "amount": 6.5, "currency": "CHF", "note": None},
]


def wire_schema_id(value: bytes) -> int:
    """The schema id of a record in the Confluent wire format: magic byte 0, then the id (4 bytes, big-endian)."""
    assert value[0] == 0, f"not the Confluent wire format (magic byte {value[0]})"
    return int.from_bytes(value[1:5], "big")


def consume_all(bootstrap_servers: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"registry-test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(120):
            message = consumer.poll(0.5)
            if message is None:
                if len(values) >= count:
                    break
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


# Serial: it restarts the schema registry the other tests share.
@pytest.mark.serial
def test_avro_subject_versions_wire_format_and_compatibility(stack, make_topic, caplog) -> None:
    from airflow.models import Connection

    caplog.set_level(logging.DEBUG)
    # The stack exports the registry as the hook's default connection, of the package's own type: the UI's
    # Test button finds the hook by the type and lists the subjects.
    connection = Connection.get_connection_from_secrets(SchemaRegistryHook.default_conn_name)
    assert isinstance(connection.get_hook(), SchemaRegistryHook)
    ok, message = connection.test_connection()
    assert ok, message

    hook = SchemaRegistryHook()
    assert hook.client_config() == stack.schema_registry_client_config()
    client = hook.get_conn()
    assert isinstance(client, SchemaRegistryClient)
    assert client.get_compatibility() == "BACKWARD"  # the stack's global rule, Confluent's default

    topic = make_topic(partitions=1, prefix="avro")
    subject = f"{topic}-value"  # TopicNameStrategy, the serializers' default
    client.set_compatibility(subject_name=subject, level="BACKWARD")
    assert client.get_compatibility(subject) == "BACKWARD"

    ids = [client.register_schema(subject, Schema(json.dumps(v), "AVRO")) for v in VERSIONS]
    assert len(set(ids)) == 3, ids
    assert client.get_versions(subject) == [1, 2, 3]
    for number, schema_id in enumerate(ids, start=1):
        registered = client.get_version(subject, number)
        assert (registered.schema_id, registered.version) == (schema_id, number)
    # registering a version again is idempotent: same id, no new version
    assert client.register_schema(subject, Schema(json.dumps(VERSIONS[1]), "AVRO")) == ids[1]
    assert client.get_versions(subject) == [1, 2, 3]

    # Records written by producers of each version, as confluent-kafka's serializer frames them.
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    context = SerializationContext(topic, MessageField.VALUE)
    for index, record in enumerate(RECORDS):
        version = VERSIONS[index // 2]
        serializer = AvroSerializer(client, json.dumps(version), conf={"auto.register.schemas": False})
        producer.produce(topic, value=serializer(record, context), key=str(record["id"]).encode())
    assert producer.flush(30) == 0

    values = consume_all(stack.bootstrap_servers, topic, len(RECORDS))
    assert len(values) == len(RECORDS)
    written_ids = [wire_schema_id(value) for value in values]
    assert written_ids == [ids[0], ids[0], ids[1], ids[1], ids[2], ids[2]]

    # Each writer schema by its id, from a client without the serializer's cache; every record read
    # with its writer schema and the newest version as reader schema (the defaults fill what is missing).
    fresh = SchemaRegistryClient(hook.client_config())
    newest = fastavro.parse_schema(VERSIONS[-1])
    for value, schema_id, record in zip(values, written_ids, RECORDS):
        writer = fresh.get_schema(schema_id)
        assert writer.schema_type in ("AVRO", None)  # Apicurio leaves the type out for Avro, as Confluent does
        assert json.loads(writer.schema_str) == VERSIONS[ids.index(schema_id)]
        decoded = fastavro.schemaless_reader(
            io.BytesIO(value[5:]), fastavro.parse_schema(json.loads(writer.schema_str)), newest
        )
        assert decoded == {"currency": None, "note": None, **record}

    # An incompatible change (a new field without a default) is refused under BACKWARD: 409.
    incompatible = Schema(json.dumps(order_schema(*ADDED_FIELDS, REQUIRED_FIELD)), "AVRO")
    assert fresh.test_compatibility(subject, incompatible) is False
    assert fresh.test_compatibility(subject, Schema(json.dumps(VERSIONS[-1]), "AVRO")) is True
    with pytest.raises(SchemaRegistryError) as refused:
        fresh.register_schema(subject, incompatible)
    assert refused.value.http_status_code == 409, refused.value
    assert fresh.get_versions(subject) == [1, 2, 3]

    # Wrong credentials are refused.
    with pytest.raises(SchemaRegistryError) as denied:
        SchemaRegistryClient(stack.schema_registry_client_config(password="not-the-password")).get_subjects()
    assert denied.value.http_status_code == 401

    # The ids stay valid across a registry restart (its H2 database is a file in the state dir).
    devstack.restart_schema_registry()
    after_restart = SchemaRegistryClient(hook.client_config())
    for schema_id, version in zip(ids, VERSIONS):
        assert json.loads(after_restart.get_schema(schema_id).schema_str) == version
    assert after_restart.get_versions(subject) == [1, 2, 3]

    assert stack.schema_registry_password not in caplog.text
