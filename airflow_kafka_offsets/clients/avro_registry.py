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

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

# The Confluent API's error codes (Apicurio's compatible API answers the same).
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402


def resolve_reader(client: SchemaRegistryClient, avro: AvroFormat, pipeline: str) -> tuple[AvroReader, str]:
    """The reader schema ``avro`` names as the registry has it now, and its Spark columns (DDL).

    Refused (:class:`InvalidPipelineSpecError`, nothing planned): a subject or version the registry does not
    have, a schema that is not Avro, has references, or is not a record the package can decode. A refused
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
    if schema.references:
        raise InvalidPipelineSpecError(
            f"{where}: {found} refers to other subjects' schemas ({len(schema.references)} schema references), "
            "which this package does not resolve; register the reader schema self-contained. Nothing was planned"
        )
    reader = AvroReader(
        avro.subject, int(registered.version or 0), int(registered.schema_id or 0), schema.schema_str or ""
    )
    try:
        columns = reader_columns(reader.schema)
    except AvroSchemaError as exc:
        raise InvalidPipelineSpecError(
            f"{where}: {found} cannot be decoded into columns: {exc}. Nothing was planned"
        ) from None
    return reader, columns


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
