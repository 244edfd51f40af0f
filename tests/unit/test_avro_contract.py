"""The Spark app's Avro helpers (kafka_batch_avro: wire format, registry answers, writer schema fetches) and
what an Avro batch adds to its spark-submit (Spark's Avro module, the registry's access): no Spark, no registry."""

from __future__ import annotations

import base64
import io
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from airflow_kafka_offsets.errors import ConfigurationError, SparkVersionMismatchError
from airflow_kafka_offsets.spark.formats import avro_coordinates, job_dependencies, with_registry_access
from airflow_kafka_offsets.spark.settings import SparkSettings
from airflow_kafka_offsets.spark.versions import ClusterSpark
from airflow_kafka_offsets.spark_apps import kafka_batch_avro as contract
from airflow_kafka_offsets.spark_apps import kafka_batch_contract as job_contract

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (None, None)),
        (b"", (None, contract.EMPTY_VALUE)),
        (b"\x00\x00\x00\x00\x07\x02", (7, None)),
        (b"\x00\x7f\xff\xff\xff", (2**31 - 1, None)),
        (b"\x00\x00\x01\x00\x00", (65536, None)),
        (b"\x01" + bytes(20), (None, "unknown magic byte 0x01 (the Confluent wire format starts with 0x00)")),
        (b'{"id": 1}', (None, "unknown magic byte 0x7b (the Confluent wire format starts with 0x00)")),
        (b"\x00\x00\x01", (None, contract.SHORT_HEADER)),
    ],
)
def test_wire_header_gives_the_schema_id_or_why_not(value: bytes | None, expected: tuple) -> None:
    assert contract.wire_header(value) == expected


def test_a_schema_guid_in_the_record_header_is_refused_naming_the_form() -> None:
    assert contract.wire_header(b"\x02\x06abc", [contract.GUID_HEADER]) == (None, contract.GUID_FORM)
    assert "header __value_schema_id" in contract.GUID_FORM and "prefix_schema_id_serializer" in contract.GUID_FORM


ADDRESS = {"type": "record", "name": "Address", "namespace": "geo", "fields": [{"name": "city", "type": "string"}]}
COUNTRY = {"type": "enum", "name": "Country", "namespace": "geo", "symbols": ["FR", "DE"]}
PLACE = {"type": "record", "name": "Place", "namespace": "geo", "fields": [{"name": "country", "type": "Country"}]}


def test_references_are_written_in_place_of_their_first_use_transitively_and_once() -> None:
    order = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "ship", "type": "geo.Address"},
            {"name": "bill", "type": ["null", "geo.Address"], "default": None},
            {"name": "place", "type": {"type": "array", "items": "geo.Place"}},
            {"name": "home", "type": "geo.Country"},
        ],
    }
    versions = {
        ("address", 1): (json.dumps(ADDRESS), []),
        ("place", 3): (json.dumps(PLACE), [("country", 1)]),
        ("country", 1): (json.dumps(COUNTRY), []),
    }
    asked: list[tuple[str, int]] = []

    def fetch(subject: str, version: int) -> tuple[str, list[tuple[str, int]]]:
        asked.append((subject, version))
        return versions[(subject, version)]

    found = contract.collect_references([("address", 1), ("place", 3), ("address", 1)], fetch)
    assert sorted(found) == ["geo.Address", "geo.Country", "geo.Place"] and len(asked) == 3
    inlined = json.loads(contract.inline_references(json.dumps(order), found))
    ship, bill, place, home = (f["type"] for f in inlined["fields"])
    assert ship == {**ADDRESS, "name": "Address", "namespace": "geo"}
    assert bill == ["null", "geo.Address"]  # defined once: later uses refer back
    assert place["items"]["fields"][0]["type"] == {**COUNTRY, "namespace": "geo"}  # inside Place, first use
    assert home == "geo.Country"
    assert contract.inline_references(json.dumps(order), {}) == json.dumps(order)
    with pytest.raises(ValueError, match="must be a named type"):
        contract.schema_full_name('"string"')


def test_the_marker_is_added_last_with_a_default_and_never_collides() -> None:
    marked, marker = contract.marked_reader_schema(json.dumps(ORDER))
    assert marker == contract.DECODED_MARKER
    assert json.loads(marked)["fields"][-1] == {"name": marker, "type": "boolean", "default": True}
    taken = {**ORDER, "fields": [*ORDER["fields"], {"name": contract.DECODED_MARKER, "type": "int"}]}
    marked, marker = contract.marked_reader_schema(json.dumps(taken))
    assert marker == contract.DECODED_MARKER + "_"
    assert [f["name"] for f in json.loads(marked)["fields"]] == ["id", contract.DECODED_MARKER, marker]


def test_registry_answers() -> None:
    assert contract.parse_schema_answer(b'{"schema": "\\"string\\""}') == ("AVRO", '"string"', [])
    assert contract.parse_schema_answer(b'{"schema": "syntax = 1", "schemaType": "PROTOBUF"}') == (
        "PROTOBUF",
        "syntax = 1",
        [],
    )
    referring = b'{"schema": "{}", "references": [{"name": "a.B", "subject": "b-value", "version": 2}]}'
    assert contract.parse_schema_answer(referring) == ("AVRO", "{}", [("b-value", 2)])
    with pytest.raises(ValueError, match="has no schema"):
        contract.parse_schema_answer(b'{"error_code": 40403}')


def test_registry_headers_carry_basic_auth_or_a_bearer_token() -> None:
    basic = contract.registry_headers({"basic_auth": "user:pa:ss"})
    assert basic["Authorization"] == "Basic " + base64.b64encode(b"user:pa:ss").decode()
    bearer = contract.registry_headers({"bearer_token": "t", "logical_cluster": "lsrc-1", "identity_pool_id": "p"})
    assert bearer["Authorization"] == "Bearer t"
    assert (bearer["target-sr-cluster"], bearer["Confluent-Identity-Pool-Id"]) == ("lsrc-1", "p")
    assert "Authorization" not in contract.registry_headers({})


class FakeRegistry:
    """Answers GET <url>/schemas/ids/<id> like a registry; ``down`` URLs do not answer."""

    def __init__(self, schemas: dict[int, tuple[str, str]], down: tuple[str, ...] = (), status: int | None = None):
        self.schemas = schemas
        self.down = down
        self.status = status
        self.asked: list[str] = []

    def __call__(self, request: urllib.request.Request, timeout: float, context: Any) -> bytes:
        url = request.full_url
        self.asked.append(url)
        if any(url.startswith(d) for d in self.down):
            raise urllib.error.URLError("Connection refused")
        if self.status is not None:
            raise urllib.error.HTTPError(url, self.status, "no", {}, io.BytesIO(b"{}"))  # type: ignore[arg-type]
        schema_id = int(url.rsplit("/", 1)[1])
        if schema_id not in self.schemas:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, io.BytesIO(b'{"error_code": 40403}'))  # type: ignore[arg-type]
        kind, text = self.schemas[schema_id]
        return json.dumps({"schema": text, **({"schemaType": kind} if kind != "AVRO" else {})}).encode()


def test_each_writer_schema_is_fetched_once_and_unknown_ids_are_the_records_problem() -> None:
    registry = FakeRegistry({1: ("AVRO", json.dumps(ORDER)), 2: ("PROTOBUF", "syntax = 'proto3';")})
    access = {"urls": ["http://down:1/api", "http://sr:8081/api/"], "basic_auth": "u:p"}
    avro, other, unknown = contract.fetch_writer_schemas(access, [1, 2, 3, 1], registry)
    assert avro == {1: json.dumps(ORDER)} and other == {2: "PROTOBUF"} and unknown == {3}
    registry.down = ("http://down",)
    registry.asked.clear()
    contract.fetch_writer_schemas(access, [1], registry)
    assert registry.asked == ["http://down:1/api/schemas/ids/1", "http://sr:8081/api/schemas/ids/1"]


def test_a_registry_that_refuses_or_does_not_answer_fails_the_batch() -> None:
    with pytest.raises(PermissionError, match=r"refused the credentials \(HTTP 401\).*schema id 1"):
        contract.fetch_writer_schemas({"urls": ["http://sr"]}, [1], FakeRegistry({}, status=401))
    with pytest.raises(ConnectionError, match=r"did not answer for writer schema id 1 \(http://sr: HTTP 503\)"):
        contract.fetch_writer_schemas({"urls": ["http://sr"]}, [1], FakeRegistry({}, status=503))
    with pytest.raises(ConnectionError, match="Connection refused"):
        contract.fetch_writer_schemas({"urls": ["http://sr"]}, [1], FakeRegistry({}, down=("http://sr",)))
    with pytest.raises(ValueError, match="names no URL"):
        contract.fetch_writer_schemas({"urls": []}, [1], FakeRegistry({}))
    assert contract.fetch_writer_schemas({"urls": ["http://sr"]}, [], FakeRegistry({}, status=500)) == ({}, {}, set())


def test_a_request_whose_connection_the_registry_dropped_is_asked_again_a_refused_one_is_not() -> None:
    import http.client

    registry = FakeRegistry({1: ("AVRO", json.dumps(ORDER))})
    drops = [http.client.RemoteDisconnected("Remote end closed connection without response")] * 2

    def dropping(request: urllib.request.Request, timeout: float, context: Any) -> bytes:
        if drops:
            registry.asked.append(request.full_url)
            raise drops.pop()
        return registry(request, timeout, context)

    assert contract.fetch_writer_schemas({"urls": ["http://sr"]}, [1], dropping)[0] == {1: json.dumps(ORDER)}
    assert registry.asked == ["http://sr/schemas/ids/1"] * 3
    drops[:] = [http.client.RemoteDisconnected("Remote end closed connection without response")] * 3
    with pytest.raises(ConnectionError, match=r"did not answer for writer schema id 1.*Remote end closed"):
        contract.fetch_writer_schemas({"urls": ["http://sr"]}, [1], dropping)
    refused = FakeRegistry({}, down=("http://sr",))
    with pytest.raises(ConnectionError, match="Connection refused"):
        contract.fetch_writer_schemas({"urls": ["http://sr"]}, [1], refused)
    assert refused.asked == ["http://sr/schemas/ids/1"]


class FakeSubjects:
    """Answers a registry's subject requests: GET <url>/subjects/<subject>/versions[/<n>]."""

    def __init__(self, versions: dict[tuple[str, int], tuple[int, str, str, list[dict[str, Any]]]]) -> None:
        self.versions = versions  # (subject, version) -> (id, type, schema text, references)
        self.asked: list[str] = []

    def __call__(self, request: urllib.request.Request, timeout: float, context: Any) -> bytes:
        path = request.full_url.split("/subjects/", 1)[1]
        self.asked.append(path)
        quoted, _, rest = path.partition("/versions")
        subject = urllib.parse.unquote(quoted)
        if rest == "" and any(s == subject for s, _ in self.versions):
            return json.dumps(sorted(v for s, v in self.versions if s == subject)).encode()
        if rest and (subject, int(rest[1:])) in self.versions:
            schema_id, kind, text, references = self.versions[(subject, int(rest[1:]))]
            answer = {"subject": subject, "version": int(rest[1:]), "id": schema_id, "schema": text}
            answer |= {"schemaType": kind} if kind != "AVRO" else {}
            return json.dumps(answer | ({"references": references} if references else {})).encode()
        raise urllib.error.HTTPError(request.full_url, 404, "Not Found", {}, io.BytesIO(b"{}"))  # type: ignore[arg-type]


def order_version(fields: int) -> str:
    extra = [{"name": f"f{n}", "type": "long", "default": 0} for n in range(fields)]
    return json.dumps({**ORDER, "fields": [*ORDER["fields"], *extra]})


def test_the_subjects_newest_versions_are_fetched_by_id_before_any_record_is_read() -> None:
    shipping = json.dumps({**ORDER, "fields": [{"name": "ship", "type": "geo.Address"}]})
    address = [{"name": "geo.Address", "subject": "geo", "version": 1}]
    registry = FakeSubjects(
        {
            **{("orders value", v): (10 + v, "AVRO", order_version(v), []) for v in (1, 2, 3, 5)},
            ("orders value", 4): (14, "PROTOBUF", "syntax = 'proto3';", []),
            ("orders value", 6): (16, "AVRO", shipping, address),
            ("geo", 1): (30, "AVRO", json.dumps(ADDRESS), []),
        }
    )
    access = {"urls": ["http://sr"]}
    avro, other = contract.fetch_subject_writer_schemas(access, "orders value", registry, limit=4)
    assert sorted(avro) == [13, 15, 16] and other == {14: "PROTOBUF"}
    assert avro[13] == order_version(3)
    assert json.loads(avro[16])["fields"][0]["type"] == {**ADDRESS, "name": "Address", "namespace": "geo"}
    assert registry.asked == [
        "orders%20value/versions",
        *(f"orders%20value/versions/{v}" for v in (3, 4, 5, 6)),
        "geo/versions/1",
    ]
    assert contract.fetch_subject_writer_schemas(access, "gone-value", registry) == ({}, {})
    assert contract.fetch_subject_writer_schemas(access, "orders value", registry, limit=0) == ({}, {})


def test_writer_ids_met_in_a_write_are_fetched_once_and_only_known_ones_ask_for_another_write() -> None:
    from airflow_kafka_offsets.spark_apps.kafka_batch_decode import AvroWriters

    asked: list[set[int]] = []

    def by_id(access: Any, ids: set[int]) -> tuple[dict[int, str], dict[int, str], set[int]]:
        asked.append(set(ids))
        return {i: order_version(1) for i in ids if i == 7}, {i: "JSON" for i in ids if i == 8}, ids - {7, 8}

    writers = AvroWriters({"urls": ["http://sr"]}, "s", lambda access, subject: ({1: ORDER_TEXT}, {}), by_id)
    assert (writers.avro, writers.other) == ({1: ORDER_TEXT}, {})
    assert writers.learn([1]) is False and asked == []  # known up front: nothing to fetch
    assert writers.learn([1, 9]) is False and asked == [{9}]  # unknown to the registry: the records' error stands
    assert writers.learn([9, 7]) is True and asked[-1] == {7}
    assert writers.learn([8]) is True and writers.other == {8: "JSON"}
    assert writers.learn([7, 8, 9]) is False and len(asked) == 3
    assert sorted(writers.avro) == [1, 7]


ORDER_TEXT = json.dumps(ORDER)

SPARK_42 = ClusterSpark("4.2.0", "2.13", "test")
SPARK_35 = ClusterSpark("3.5.7", "2.12", "test")
AVRO_JOB = {"pipeline": "p", "batch_id": 3, "decode": {"format": "avro", "registry_conn_id": "sr"}}
JSON_JOB = {"pipeline": "p", "batch_id": 3, "decode": {"format": "json", "schema": "id STRING"}}
KAFKA_JAR = "/jars/spark-sql-kafka-0-10_2.13-4.2.0.jar"


def test_an_avro_batch_gets_spark_avro_for_the_spark_that_runs_it() -> None:
    assert job_dependencies(JSON_JOB, SPARK_42, [KAFKA_JAR], []) == ((KAFKA_JAR,), ())
    assert job_dependencies(AVRO_JOB, SPARK_42, [KAFKA_JAR], []) == (
        (KAFKA_JAR,),
        ("org.apache.spark:spark-avro_2.13:4.2.0",),
    )
    assert avro_coordinates(SPARK_35) == "org.apache.spark:spark-avro_2.12:3.5.7"
    kafka = "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7"
    assert job_dependencies(AVRO_JOB, SPARK_35, [], [kafka]) == ((), (kafka, "org.apache.spark:spark-avro_2.12:3.5.7"))
    # given ones are kept when they fit the line (a patch release of the line is fine)
    given = (KAFKA_JAR, "/jars/spark-avro_2.13-4.2.1.jar")
    assert job_dependencies(AVRO_JOB, SPARK_42, given, []) == (given, ())
    assert job_dependencies(AVRO_JOB, SPARK_42, [], ["org.apache.spark:spark-avro_2.13:4.2.0"])[1] == (
        "org.apache.spark:spark-avro_2.13:4.2.0",
    )
    with pytest.raises(SparkVersionMismatchError, match=r"Avro module is version 4.1.1 for Scala 2.13.*use org"):
        job_dependencies(AVRO_JOB, SPARK_42, ["/jars/spark-avro_2.13-4.1.1.jar"], [])
    with pytest.raises(SparkVersionMismatchError, match=r"spark-avro_2.12:3.5.7"):
        job_dependencies(AVRO_JOB, SPARK_35, [], ["org.apache.spark:spark-avro_2.13:4.2.0"])


def test_the_registry_access_goes_into_the_private_job_only_for_avro() -> None:
    settings = SparkSettings(registry_access=lambda conn_id: {"urls": [f"http://{conn_id}"], "basic_auth": "u:secret"})
    private = with_registry_access(AVRO_JOB, settings)
    assert private[job_contract.REGISTRY_ACCESS] == {"urls": ["http://sr"], "basic_auth": "u:secret"}
    assert job_contract.REGISTRY_ACCESS not in AVRO_JOB  # the job itself (logged, in errors) stays without it
    assert "secret" not in repr(settings)
    assert with_registry_access(JSON_JOB, SparkSettings()) == JSON_JOB
    with pytest.raises(ConfigurationError, match=r"batch 3 of pipeline 'p' decodes Avro values.*connection 'sr'"):
        with_registry_access(AVRO_JOB, SparkSettings())
