"""The Avro side of the contract: the Confluent wire format, why a record does not decode, and the
schema registry's answers (writer schemas by id, a subject's versions, references inlined).

Plain Python with no imports beyond the standard library, shared by the Spark app and the package
(``airflow_kafka_offsets.spark_apps.kafka_batch_avro``) like ``kafka_batch_contract.py``; spark-submit ships
it next to the app with ``--py-files``.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# Avro values in the Confluent wire format: magic byte 0, the writer schema's id (4 bytes, big-endian),
# then the Avro binary encoding. Why a record does not decode, as its decode_error says (the app builds
# the same texts in Spark; wire_header is the same check in Python).
MAGIC_BYTE = 0
WIRE_HEADER_BYTES = 5
EMPTY_VALUE = "value is empty: no Confluent wire format header"
UNKNOWN_MAGIC = ("unknown magic byte 0x", " (the Confluent wire format starts with 0x00)")
SHORT_HEADER = "value is shorter than the 5-byte header of the Confluent wire format"
UNKNOWN_SCHEMA_ID = ("unknown schema id ", " (the schema registry does not have it)")
UNDECODABLE = ("payload does not decode with writer schema id ", " into the reader schema")
# Confluent's newer header form: the writer schema named by a GUID (magic byte 0x01, then 16 bytes) in the
# record header __value_schema_id, the value the bare Avro binary (confluent-kafka's
# header_schema_id_serializer). Writer schemas are fetched by id (GET /schemas/ids/<id>) only: Apicurio
# Registry 3.3's Confluent API serves no GUIDs (none in its answers, 404 for GET /schemas/guids/<guid>), so
# GUID support could not be tested against a real registry, and such records are kept as errors.
GUID_HEADER = "__value_schema_id"
GUID_FORM = (
    "writer schema named by GUID in record header __value_schema_id (Confluent's header form): not supported, "
    "writer schemas are resolved by the 4-byte id after magic byte 0x00 only (schema registries of the Confluent "
    "API do not all serve GUIDs); produce with the serializer's default schema.id.serializer "
    "(prefix_schema_id_serializer)"
)
# The field the app adds to the reader schema (a boolean with default true): from_avro's PERMISSIVE mode
# gives a struct of nulls both for a record it could not decode and one whose fields are all null; the
# marker is true only for a record that decoded.
DECODED_MARKER = "__kafka_offsets_decoded"
REGISTRY_TIMEOUT_S = 30.0
# A request whose connection the registry closed before answering is asked again after these pauses.
DROPPED_PAUSES_S = (0.2, 0.5)
# How many of the reader subject's newest versions an Avro batch decodes with before reading any record
# (fetch_subject_writer_schemas); a record of another writer schema costs its batch a second write.
CANDIDATE_VERSIONS = 20


def wire_header(value: bytes | None, header_keys: Iterable[str] = ()) -> tuple[int | None, str | None]:
    """The writer schema id of a value in the Confluent wire format, or why it is not in it
    (``header_keys``: the record's header keys; a GUID header is the header form, not read).

    ``(None, None)`` for a tombstone (no value: nothing to decode, not an error)."""
    if value is None:
        return None, None
    if GUID_HEADER in header_keys:
        return None, GUID_FORM
    if not value:
        return None, EMPTY_VALUE
    if value[0] != MAGIC_BYTE:
        return None, f"{UNKNOWN_MAGIC[0]}{value[0]:02x}{UNKNOWN_MAGIC[1]}"
    if len(value) < WIRE_HEADER_BYTES:
        return None, SHORT_HEADER
    return int.from_bytes(value[1:WIRE_HEADER_BYTES], "big"), None


def not_avro(schema_id: int, schema_type: str) -> str:
    return f"schema id {schema_id} is a {schema_type} schema, not Avro"


def marked_reader_schema(schema: str) -> tuple[str, str]:
    """The reader schema with the decoded marker added as its last field, and the marker's name
    (:data:`DECODED_MARKER`, suffixed if the schema has a field of that name)."""
    parsed = json.loads(schema)
    names = {str(f.get("name")) for f in parsed.get("fields", [])}
    marker = DECODED_MARKER
    while marker in names:
        marker += "_"
    field = {"name": marker, "type": "boolean", "default": True}
    return json.dumps({**parsed, "fields": [*parsed["fields"], field]}), marker


def parse_schema_answer(body: bytes) -> tuple[str, str, list[tuple[str, int]]]:
    """(schema type, schema text, references as (subject, version)) of the registry's answer to
    ``GET /schemas/ids/<id>`` or ``GET /subjects/<subject>/versions/<version>``; the type is ``AVRO`` when
    the registry leaves it out (Confluent's and Apicurio's answers for Avro do)."""
    data = json.loads(body.decode("utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("schema"), str):
        raise ValueError("the schema registry's answer has no schema")
    references = [(str(r["subject"]), int(r["version"])) for r in data.get("references") or []]
    return str(data.get("schemaType") or "AVRO").upper(), data["schema"], references


# Schema references: an Avro schema may use named types (records, enums, fixed) another subject's version
# defines. Spark's from_avro takes one self-contained schema, so each referenced definition is written in
# place of the first use of its name (later uses refer back to it, as Avro's parser reads in order).
NAMED_TYPES = ("record", "enum", "fixed")


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def schema_full_name(schema: str) -> str:
    """The full name of a named type's schema (JSON text): what a schema referring to it calls it."""
    parsed = json.loads(schema)
    if not isinstance(parsed, dict) or parsed.get("type") not in NAMED_TYPES or not parsed.get("name"):
        raise ValueError(f"a referenced schema must be a named type (record, enum, fixed), got {schema[:80]!r}")
    return _full_name(str(parsed["name"]), parsed.get("namespace"))


def collect_references(
    references: Iterable[tuple[str, int]], fetch_version: Callable[[str, int], tuple[str, list[tuple[str, int]]]]
) -> dict[str, str]:
    """Every named type the references define, transitively: full name -> its schema (JSON text).
    ``fetch_version(subject, version)`` gives a subject version's schema and its own references."""
    found: dict[str, str] = {}
    seen: set[tuple[str, int]] = set()
    pending = list(references)
    while pending:
        reference = pending.pop()
        if reference in seen:
            continue
        seen.add(reference)
        schema, more = fetch_version(*reference)
        found[schema_full_name(schema)] = schema
        pending += more
    return found


def inline_references(schema: str, definitions: Mapping[str, str]) -> str:
    """``schema`` (JSON text) made self-contained: each named type of ``definitions`` (full name -> its
    schema) written in place of its first use."""
    if not definitions:
        return schema
    parsed_definitions = {name: json.loads(text) for name, text in definitions.items()}
    placed: set[str] = set()

    def walk(node: Any, namespace: str | None) -> Any:
        if isinstance(node, list):
            return [walk(branch, namespace) for branch in node]
        if isinstance(node, str):
            name = node if node in parsed_definitions else _full_name(node, namespace)
            if name not in parsed_definitions or name in placed:
                return node
            placed.add(name)
            definition = dict(parsed_definitions[name])
            # its own full name and namespace: inside another schema a bare name would take the referrer's
            definition["name"], definition["namespace"] = (
                name.rsplit(".", 1)[-1],
                name.rsplit(".", 1)[0] if "." in name else "",
            )
            return walk(definition, None)
        if not isinstance(node, dict):
            return node
        out = dict(node)
        kind = node.get("type")
        if kind in NAMED_TYPES and isinstance(node.get("name"), str):
            own = _full_name(node["name"], node.get("namespace", namespace))
            placed.add(own)
            namespace = own.rsplit(".", 1)[0] if "." in own else None
            if kind == "record":
                out["fields"] = [{**f, "type": walk(f.get("type"), namespace)} for f in node.get("fields") or []]
        elif kind == "array":
            out["items"] = walk(node.get("items"), namespace)
        elif kind == "map":
            out["values"] = walk(node.get("values"), namespace)
        elif isinstance(kind, (str, list, dict)):
            out["type"] = walk(kind, namespace)
        return out

    return json.dumps(walk(json.loads(schema), None))


Fetch = Callable[[urllib.request.Request, float, "ssl.SSLContext | None"], bytes]


def _urlopen(request: urllib.request.Request, timeout: float, context: ssl.SSLContext | None) -> bytes:
    with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:  # http(s): the connection's URLs
        body: bytes = answer.read()
        return body


def _dropped(exc: BaseException) -> bool:
    """The connection was closed or reset before an answer came ("Remote end closed connection without
    response"): a registry shedding load or restarting, not one that is down or silent."""
    return isinstance(getattr(exc, "reason", exc), (ConnectionResetError, ConnectionAbortedError))


def _fetch_again_if_dropped(fetch: Fetch, request: urllib.request.Request, context: ssl.SSLContext | None) -> bytes:
    """``fetch`` once, and again after each of ``DROPPED_PAUSES_S`` while the connection is dropped before an
    answer; a refusal, a timeout or an HTTP error is not asked again (the batch's retry is what follows)."""
    for pause in DROPPED_PAUSES_S:
        try:
            return fetch(request, REGISTRY_TIMEOUT_S, context)
        except OSError as exc:  # urllib's errors among them (an HTTPError's reason is its text: not dropped)
            if not _dropped(exc):
                raise
        time.sleep(pause)
    return fetch(request, REGISTRY_TIMEOUT_S, context)


def registry_headers(access: Mapping[str, Any]) -> dict[str, str]:
    """The registry request's headers: basic auth or a bearer token (secrets: never log them)."""
    headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
    if access.get("basic_auth"):
        headers["Authorization"] = "Basic " + base64.b64encode(str(access["basic_auth"]).encode()).decode()
    elif access.get("bearer_token"):
        headers["Authorization"] = f"Bearer {access['bearer_token']}"
        if access.get("logical_cluster"):
            headers["target-sr-cluster"] = str(access["logical_cluster"])
        if access.get("identity_pool_id"):
            headers["Confluent-Identity-Pool-Id"] = str(access["identity_pool_id"])
    return headers


def _get(access: Mapping[str, Any], path: str, what: str, fetch: Fetch) -> bytes | None:
    """``GET <url><path>`` from the first of the registry's URLs that answers; None for a 404. Refused
    credentials or no answer at all raise (the batch's problem: a retry may succeed)."""
    urls = [str(u).rstrip("/") for u in access.get("urls") or []]
    if not urls:
        raise ValueError("the job's schema registry access names no URL")
    cafile = access.get("ssl_ca_location")
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    failures = []
    for url in urls:
        request = urllib.request.Request(f"{url}{path}", headers=registry_headers(access))
        try:
            return _fetch_again_if_dropped(fetch, request, context if url.startswith("https:") else None)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if exc.code in (401, 403):
                raise PermissionError(
                    f"the schema registry at {url} refused the credentials (HTTP {exc.code}) asking for {what}: "
                    "check the schema registry connection"
                ) from None
            failures.append(f"{url}: HTTP {exc.code}")
        except (urllib.error.URLError, OSError) as exc:
            failures.append(f"{url}: {getattr(exc, 'reason', exc)}")
    raise ConnectionError(f"the schema registry did not answer for {what} ({'; '.join(failures)})")


def fetch_writer_schemas(
    access: Mapping[str, Any], schema_ids: Iterable[int], fetch: Fetch = _urlopen
) -> tuple[dict[int, str], dict[int, str], set[int]]:
    """Each schema id from the registry once: (Avro schemas by id, self-contained, other schema types by
    id, unknown ids).

    An id the registry does not have is the records' problem (their decode_error says so); a registry
    that does not answer, refuses the credentials or fails is the batch's (raised: a retry may succeed).
    The registry's URLs are tried in order until one answers. A schema's references (named types of
    other subjects' versions) are fetched too and written into it (:func:`inline_references`).
    """
    avro: dict[int, str] = {}
    other: dict[int, str] = {}
    unknown: set[int] = set()
    for schema_id in sorted(set(int(i) for i in schema_ids)):
        body = _get(access, f"/schemas/ids/{schema_id}", f"writer schema id {schema_id}", fetch)
        if body is None:
            unknown.add(schema_id)
            continue
        _keep_writer(schema_id, body, avro, other, access, fetch)
    return avro, other, unknown


def fetch_subject_writer_schemas(
    access: Mapping[str, Any], subject: str, fetch: Fetch = _urlopen, limit: int = CANDIDATE_VERSIONS
) -> tuple[dict[int, str], dict[int, str]]:
    """The writer schemas a batch's records most likely carry, before reading any record: the subject's newest
    ``limit`` versions, by schema id (Avro schemas self-contained, other schema types by id).

    One request for the subject's versions and one per version, instead of a pass over the batch's values for
    their ids. A subject the registry no longer has gives none (its records' ids are then fetched one by one,
    as any id outside these: :func:`fetch_writer_schemas`).
    """
    quoted = urllib.parse.quote(subject, safe="")
    body = _get(access, f"/subjects/{quoted}/versions", f"the versions of subject {subject!r}", fetch)
    versions = sorted(int(v) for v in json.loads(body.decode("utf-8"))) if body is not None else []
    avro: dict[int, str] = {}
    other: dict[int, str] = {}
    for number in versions[-limit:] if limit > 0 else []:
        answer = _get(access, f"/subjects/{quoted}/versions/{number}", f"subject {subject!r} version {number}", fetch)
        if answer is not None:  # a version deleted meanwhile: its id, if records carry it, is fetched by id
            _keep_writer(int(json.loads(answer.decode("utf-8"))["id"]), answer, avro, other, access, fetch)
    return avro, other


def _keep_writer(
    schema_id: int, body: bytes, avro: dict[int, str], other: dict[int, str], access: Mapping[str, Any], fetch: Fetch
) -> None:
    """File the registry's answer for a writer schema under ``avro`` (self-contained) or ``other`` (its type)."""

    def version(subject: str, number: int) -> tuple[str, list[tuple[str, int]]]:
        what = f"subject {subject!r} version {number} (a writer schema refers to it)"
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{number}"
        found = _get(access, path, what, fetch)
        if found is None:
            raise LookupError(f"the schema registry does not have {what}")
        _, schema, references = parse_schema_answer(found)
        return schema, references

    kind, schema, references = parse_schema_answer(body)
    if kind != "AVRO":
        other[schema_id] = kind
        return
    avro[schema_id] = inline_references(schema, collect_references(references, version)) if references else schema
