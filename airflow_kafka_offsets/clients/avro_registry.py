"""Avro through a schema registry: the reader schema a batch is planned with, and how Spark reaches
the registry to fetch writer schemas.

- :func:`resolve_reader` asks the registry (confluent-kafka's ``SchemaRegistryClient``, from
  ``SchemaRegistryHook``) for the subject's latest version, or the pinned one, and checks it is an
  Avro record schema the package can turn into columns.
- :func:`spark_registry_config` is what the Spark app gets (in its private job file, never on a command
  line) to fetch each writer schema id once per batch with plain HTTP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_kafka_offsets.clients.schema_registry import RegistryAccess
from airflow_kafka_offsets.core.avro import AvroSchemaError, reader_columns
from airflow_kafka_offsets.core.model import AvroFormat, AvroReader
from airflow_kafka_offsets.errors import ConfigurationError, InvalidPipelineSpecError, SchemaRegistryUnavailableError
from airflow_kafka_offsets.spark_apps.kafka_batch_avro import collect_references, inline_references

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

# The Confluent API's error codes (Apicurio's compatible API answers the same).
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402


def resolve_reader(client: SchemaRegistryClient, avro: AvroFormat, pipeline: str) -> tuple[AvroReader, str]:
    """The reader schema ``avro`` names as the registry has it now, and its Spark columns (DDL).

    A schema with references (named types of other subjects' versions) gets them written into it: the
    reader recorded is self-contained. Refused (:class:`InvalidPipelineSpecError`, nothing planned): a
    subject or version the registry does not have, a schema that is not Avro, a reference the registry
    cannot give, a schema that is not a record the package can decode. A refused
    key is a :class:`ConfigurationError`; a registry that does not answer, a retryable
    :class:`SchemaRegistryUnavailableError`.
    """
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    wanted = "its latest version" if avro.version is None else f"version {avro.version}"
    where = f"pipeline {pipeline!r}: value_format subject {avro.subject!r}"
    try:
        registered = client.get_version(avro.subject, "latest" if avro.version is None else avro.version)
    except SchemaRegistryError as exc:
        if exc.error_code in (SUBJECT_NOT_FOUND, VERSION_NOT_FOUND) or exc.http_status_code == 404:
            missing = "no such subject" if exc.error_code == SUBJECT_NOT_FOUND else f"no {wanted} of it"
            raise InvalidPipelineSpecError(
                f"{where}: the schema registry (connection {avro.registry_conn_id!r}) has {missing} "
                f"({exc.error_message}); register the reader schema first, or fix value_format.subject / .version. "
                "Nothing was planned"
            ) from None
        if exc.http_status_code in (401, 403):
            raise ConfigurationError(
                f"{where}: the schema registry refused connection {avro.registry_conn_id!r}'s credentials "
                f"(HTTP {exc.http_status_code}); fix the connection. Nothing was planned"
            ) from None
        raise SchemaRegistryUnavailableError(
            f"{where}: the schema registry answered HTTP {exc.http_status_code} ({exc.error_message}); "
            "nothing was planned, retry later"
        ) from None
    except (OSError, ValueError) as exc:  # httpx's transport errors are OSErrors; a body that is not JSON
        raise SchemaRegistryUnavailableError(
            f"{where}: the schema registry (connection {avro.registry_conn_id!r}) did not answer "
            f"({type(exc).__name__}: {exc}); nothing was planned, retry later"
        ) from exc
    except Exception as exc:  # httpx errors that are not OSErrors (timeouts, protocol errors)
        if type(exc).__module__.startswith("httpx"):
            raise SchemaRegistryUnavailableError(
                f"{where}: the schema registry (connection {avro.registry_conn_id!r}) did not answer "
                f"({type(exc).__name__}: {exc}); nothing was planned, retry later"
            ) from exc
        raise
    schema = registered.schema
    kind = schema.schema_type or "AVRO"
    found = f"{wanted} (version {registered.version}, schema id {registered.schema_id})"
    if kind != "AVRO":
        raise InvalidPipelineSpecError(f"{where}: {found} is a {kind} schema, not Avro. Nothing was planned")
    text = schema.schema_str or ""
    if schema.references:
        text = _self_contained(client, text, _pairs(schema.references), where, found)
    reader = AvroReader(avro.subject, int(registered.version or 0), int(registered.schema_id or 0), text)
    try:
        columns = reader_columns(reader.schema)
    except AvroSchemaError as exc:
        raise InvalidPipelineSpecError(
            f"{where}: {found} cannot be decoded into columns: {exc}. Nothing was planned"
        ) from None
    return reader, columns


def _pairs(references: list[Any]) -> list[tuple[str, int]]:
    """(subject, version) of confluent-kafka's ``SchemaReference`` objects."""
    return [(str(r.subject), int(r.version or 0)) for r in references]


def _self_contained(
    client: SchemaRegistryClient, schema: str, references: list[tuple[str, int]], where: str, found: str
) -> str:
    """The reader schema with the named types it refers to (other subjects' versions, transitively) written
    into it: what from_avro takes and what the ledger records, so a replay needs no reference again."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    def version(subject: str, number: int) -> tuple[str, list[tuple[str, int]]]:
        try:
            registered = client.get_version(subject, number)
        except SchemaRegistryError as exc:
            raise InvalidPipelineSpecError(
                f"{where}: {found} refers to subject {subject!r} version {number}, which the schema registry "
                f"cannot give ({exc.error_message}, HTTP {exc.http_status_code}). Nothing was planned"
            ) from None
        return registered.schema.schema_str or "", _pairs(registered.schema.references or [])

    try:
        return str(inline_references(schema, collect_references(references, version)))
    except ValueError as exc:
        raise InvalidPipelineSpecError(f"{where}: {found} has a reference the package cannot use: {exc}") from None


def spark_registry_config(access: RegistryAccess) -> dict[str, Any]:
    """How the Spark app reaches the registry (secrets included: only for the private job file)."""
    return {
        "urls": list(access.urls),
        "basic_auth": f"{access.user}:{access.password}" if access.user is not None else None,
        "bearer_token": access.bearer_token,
        "logical_cluster": access.logical_cluster,
        "identity_pool_id": access.identity_pool_id,
        "ssl_ca_location": access.ssl_ca_location,
    }
