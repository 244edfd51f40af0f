"""Avro values in the forms beyond one self-contained schema per id, on the stack's registry (Apicurio).

- Schema references: a subject whose record uses a named type of another subject, registered and
  written through confluent-kafka's ``SchemaRegistryClient`` and ``AvroSerializer``, lands typed, and
  the ledger records the reader schema with the referenced type written into it.
- Confluent's header form (the writer schema's GUID in header ``__value_schema_id``): Apicurio 3.3's
  Confluent API serves no GUIDs, so the real serializer cannot write it against this registry and the
  package keeps such records as decode errors naming the form.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S
from airflow_kafka_offsets.spark_apps.kafka_batch_avro import GUID_FORM, GUID_HEADER

from .pipeline import run_once
from .test_avro import avro_spec, output_rows

pytestmark = pytest.mark.usefixtures("batches_on_spark_connect")

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "ako.geo",
    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "ako.shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ship", "type": "ako.geo.Address"},
        {"name": "bill", "type": ["null", "ako.geo.Address"], "default": None},
    ],
}


def registry(stack) -> SchemaRegistryClient:
    return SchemaRegistryClient({**stack.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S})


def produce(stack, topic: str, records: list[tuple[bytes, bytes, list[tuple[str, bytes]]]]) -> list[int]:
    """(key, value, headers) in order to partition 0; their offsets."""
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "enable.idempotence": True})
    offsets: dict[bytes, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        offsets[msg.key()] = msg.offset()

    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    return [offsets[key] for key, _, _ in records]


def test_a_schema_with_references_lands_typed_and_the_ledger_records_it_self_contained(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1, prefix="avro-ref")
    client = registry(stack)
    address_subject = f"{topic}-address"
    client.register_schema(address_subject, Schema(json.dumps(ADDRESS), "AVRO"))
    referring = Schema(json.dumps(ORDER), "AVRO", [SchemaReference("ako.geo.Address", address_subject, 1)])
    order_id = client.register_schema(f"{topic}-value", referring)
    serializer = AvroSerializer(client, referring, conf={"auto.register.schemas": False})
    context = SerializationContext(topic, MessageField.VALUE)
    orders = [
        {"id": 1, "ship": {"city": "Lyon", "zip": 69001}, "bill": None},
        {"id": 2, "ship": {"city": "Köln", "zip": 50667}, "bill": {"city": "Bonn", "zip": 53111}},
    ]
    records = [(f"o{o['id']}".encode(), serializer(o, context), []) for o in orders]
    assert all(value[1:5] == int(order_id).to_bytes(4, "big") for _, value, _ in records)
    offsets = produce(stack, topic, records)

    spec = avro_spec("avro_references", topic, str(tmp_path))
    assert run_once(ledger, spec, stack).records == 2
    rows = sorted(output_rows(stack, ledger, spec), key=lambda r: r["offset"])
    assert [(r["offset"], r["decode_error"], r["decoded"]) for r in rows] == [
        (offset, None, order) for offset, order in zip(offsets, orders, strict=True)
    ]
    with ledger.transaction() as tx:
        recorded = tx.batch_decode(spec.name, 1)
    assert recorded is not None and recorded.reader is not None
    assert recorded.reader.schema_id == order_id
    ship = json.loads(recorded.reader.schema)["fields"][1]["type"]
    assert ship["name"] == "Address" and ship["namespace"] == "ako.geo"  # written in: a replay needs no reference
    assert recorded.schema == (
        "`id` BIGINT, `ship` STRUCT<`city` STRING, `zip` INT>, `bill` STRUCT<`city` STRING, `zip` INT>"
    )


def test_the_header_form_cannot_be_served_by_this_registry_and_its_records_are_kept_as_errors(
    stack, ledger, make_topic, tmp_path
):
    topic = make_topic(partitions=1, prefix="avro-guid")
    client = registry(stack)
    schema = {"type": "record", "name": "Ping", "fields": [{"name": "id", "type": "long"}]}
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
    # The evidence: the registry's answers carry no GUID, and it has no /schemas/guids/<guid> resource.
    assert client.get_latest_version(f"{topic}-value").guid is None
    with pytest.raises(SchemaRegistryError) as no_guids:
        client.get_schema_by_guid(str(uuid.uuid4()))
    assert no_guids.value.http_status_code == 404
    context = SerializationContext(topic, MessageField.VALUE, [])
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    header_form = AvroSerializer(
        client, json.dumps(schema), conf={**conf, "schema.id.serializer": header_schema_id_serializer}
    )
    with pytest.raises(SerializationError, match="Schema GUID is not set"):
        header_form({"id": 1}, context)

    # Records as that serializer writes them for a registry that serves GUIDs: the bare Avro binary, and the
    # GUID (magic byte 0x01, 16 bytes) in the header; beside them a record in the id form.
    prefixed = AvroSerializer(client, json.dumps(schema), conf=conf)
    bare = prefixed({"id": 7}, SerializationContext(topic, MessageField.VALUE))[5:]
    guid_header = [(GUID_HEADER, b"\x01" + uuid.uuid4().bytes)]
    records = [
        (b"guid-1", bare, guid_header),
        (b"id-1", prefixed({"id": 8}, SerializationContext(topic, MessageField.VALUE)), []),
        (b"guid-2", b"\x00" + int(schema_id).to_bytes(4, "big") + bare, guid_header),  # the header wins
    ]
    offsets = produce(stack, topic, records)
    spec = avro_spec("avro_guid", topic, str(tmp_path))
    assert run_once(ledger, spec, stack).records == 3
    rows = sorted(output_rows(stack, ledger, spec), key=lambda r: r["offset"])
    assert [(r["offset"], r["key"], r["decode_error"], r["decoded"]) for r in rows] == [
        (offsets[0], b"guid-1", GUID_FORM, None),
        (offsets[1], b"id-1", None, {"id": 8}),
        (offsets[2], b"guid-2", GUID_FORM, None),
    ]
