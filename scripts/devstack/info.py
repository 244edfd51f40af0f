"""StackInfo: how to reach the running stack (for pytest fixtures, benchmarks, the CLI)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import iceberg_rest, schema_registry, seaweedfs, spark_connect, state
from .errors import StackError
from .s3_request import S3Credentials

S3_CONN_ID = "kafka_offsets_s3"
# The broker's SASL_SSL listener as a `kafka` connection: printed by `scripts/stack env`, but not in
# the environment the stack gives Airflow and the tests (airflow_env()), so its password is in no
# process's environment unless asked for.
KAFKA_SASL_SSL_CONN_ID = "kafka_sasl_ssl"
SPARK_CONNECT_CONN_ID = "spark_connect_default"  # SparkConnectHook's default connection
# The schema registry as a connection of the package's own type (SchemaRegistryHook's default id).
SCHEMA_REGISTRY_CONN_ID = "schema_registry_default"
SCHEMA_REGISTRY_CONN_TYPE = "kafka_offsets_schema_registry"
# The Iceberg REST catalog as a connection of the package's own type (IcebergRestCatalogHook's default id).
ICEBERG_REST_CONN_ID = "iceberg_rest_default"
ICEBERG_REST_CONN_TYPE = "kafka_offsets_iceberg_rest"


@dataclass(frozen=True)
class StackInfo:
    bootstrap_servers: str
    pg_host: str
    pg_port: int
    pg_user: str
    pg_password: str
    pg_database: str
    connector_jars: tuple[str, ...]
    kafka_libs_dir: str
    spark_master_url: str | None
    state_dir: str
    # The broker's SASL_PLAINTEXT listener (mechanism PLAIN); None on a stack started
    # before it existed (`devstack.up()` adds it, restarting the broker once).
    sasl_bootstrap_servers: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    # The broker's SASL_SSL listener (mechanism SCRAM-SHA-512, a certificate of the stack's own CA,
    # ssl_ca_file); None on a stack started before it existed (`devstack.up()` adds it).
    sasl_ssl_bootstrap_servers: str | None = None
    sasl_ssl_mechanism: str | None = None
    sasl_ssl_username: str | None = None
    sasl_ssl_password: str | None = None
    ssl_ca_file: str | None = None
    # The S3 server (SeaweedFS), its bucket and key; None on a stack started before it existed
    # (`devstack.up()` adds it). s3a_jars: hadoop-aws and the AWS SDK modules for Spark's s3a://.
    s3_endpoint: str | None = None
    s3_bucket: str | None = None
    s3_region: str | None = None
    s3_access_key: str | None = None
    s3_secret_key: str | None = None
    s3a_jars: tuple[str, ...] = ()
    # The Spark Connect server (`up --spark-connect`) as a `spark_connect` connection (holds the token).
    spark_connect: dict[str, Any] | None = None
    # Connect servers of other Spark lines (`up --spark-connect --spark-version V`): release ->
    # its `spark_connect` connection, exported as `spark_connect.conn_id(release)`.
    spark_connect_lines: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The schema registry (Apicurio Registry's Confluent-compatible API, basic auth); None on a stack
    # started before it existed (`devstack.up()` adds it).
    schema_registry_url: str | None = None
    schema_registry_user: str | None = None
    schema_registry_password: str | None = None
    # The Iceberg REST catalog (OAuth2 client credentials; the bearer token its grant returns); None on
    # a stack started before it existed (`devstack.up()` adds it).
    iceberg_rest_uri: str | None = None
    iceberg_rest_warehouse: str | None = None
    iceberg_rest_client_id: str | None = None
    iceberg_rest_client_secret: str | None = None
    iceberg_rest_token: str | None = None

    @property
    def spark_connect_url(self) -> str | None:
        """sc://host:port, without the token."""
        return f"sc://{self.spark_connect['host']}:{self.spark_connect['port']}" if self.spark_connect else None

    def __repr__(self) -> str:  # keep the passwords out of logs and tracebacks
        return (
            f"StackInfo(bootstrap_servers={self.bootstrap_servers!r}, "
            f"sasl_bootstrap_servers={self.sasl_bootstrap_servers!r}, "
            f"sasl_username={self.sasl_username!r}, "
            f"sasl_ssl_bootstrap_servers={self.sasl_ssl_bootstrap_servers!r}, "
            f"sasl_ssl_username={self.sasl_ssl_username!r}, ssl_ca_file={self.ssl_ca_file!r}, "
            f"pg={self.pg_user}@{self.pg_host}:{self.pg_port}/{self.pg_database}, "
            f"spark_master_url={self.spark_master_url!r}, spark_connect_url={self.spark_connect_url!r}, "
            f"s3_endpoint={self.s3_endpoint!r}, "
            f"s3_bucket={self.s3_bucket!r}, schema_registry_url={self.schema_registry_url!r}, "
            f"schema_registry_user={self.schema_registry_user!r}, iceberg_rest_uri={self.iceberg_rest_uri!r}, "
            f"state_dir={self.state_dir!r})"
        )

    def s3_credentials(self) -> S3Credentials:
        """The S3 server's endpoint and the stack's key (includes the secret)."""
        if not (self.s3_endpoint and self.s3_access_key and self.s3_secret_key):
            raise StackError("this stack has no S3 server; run `scripts/stack up` (it adds one)")
        return S3Credentials(self.s3_endpoint, self.s3_access_key, self.s3_secret_key, self.s3_region or "us-east-1")

    def s3_connection(self) -> dict[str, Any]:
        """The S3 server as an Airflow connection of the Amazon provider's ``aws`` type."""
        creds = self.s3_credentials()
        return {
            "conn_type": "aws",
            "login": creds.access_key,
            "password": creds.secret_key,
            "extra": {
                "endpoint_url": creds.endpoint,
                "region_name": creds.region,
                "config_kwargs": {"s3": {"addressing_style": "path"}},
            },
        }

    def _require_schema_registry(self) -> tuple[str, str, str]:
        if not (self.schema_registry_url and self.schema_registry_user and self.schema_registry_password):
            raise StackError("this stack has no schema registry; run `scripts/stack up` (it adds one)")
        return self.schema_registry_url, self.schema_registry_user, self.schema_registry_password

    def schema_registry_client_config(self, password: str | None = None) -> dict[str, str]:
        """confluent-kafka's ``SchemaRegistryClient`` config for the registry (includes the password;
        ``password`` overrides it, to try wrong credentials)."""
        registry, user, secret = self._require_schema_registry()
        return {"url": registry, "basic.auth.user.info": f"{user}:{secret if password is None else password}"}

    def schema_registry_connection(self) -> dict[str, object]:
        """The registry as an Airflow connection of the package's ``kafka_offsets_schema_registry`` type."""
        registry, user, secret = self._require_schema_registry()
        return {"conn_type": SCHEMA_REGISTRY_CONN_TYPE, "host": registry, "login": user, "password": secret}

    def iceberg_rest_connection(self, secret: str | None = None) -> dict[str, object]:
        """The REST catalog as an Airflow connection of the package's ``kafka_offsets_iceberg_rest`` type:
        OAuth2 client credentials, the S3 endpoint (the key is vended by the catalog). ``secret``
        overrides the client secret, to try wrong credentials."""
        if not (self.iceberg_rest_uri and self.iceberg_rest_client_id and self.iceberg_rest_client_secret):
            raise StackError("this stack has no Iceberg REST catalog; run `scripts/stack up` (it adds one)")
        return {
            "conn_type": ICEBERG_REST_CONN_TYPE,
            "host": self.iceberg_rest_uri,
            "login": self.iceberg_rest_client_id,
            "password": self.iceberg_rest_client_secret if secret is None else secret,
            "extra": {"s3_endpoint": self.s3_endpoint, "s3_region": self.s3_region or "us-east-1"},
        }

    def sasl_client_config(self, password: str | None = None) -> dict[str, str]:
        """confluent-kafka config for the SASL_PLAINTEXT listener (includes the password).

        ``password`` overrides the real one (to try wrong credentials).
        """
        if not self.sasl_bootstrap_servers:
            raise StackError(
                "this stack has no SASL_PLAINTEXT listener; run `scripts/stack up` "
                "(it adds one) or `scripts/stack down && scripts/stack up`"
            )
        return {
            "bootstrap.servers": self.sasl_bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": self.sasl_mechanism or "PLAIN",
            "sasl.username": self.sasl_username or "",
            "sasl.password": (self.sasl_password or "") if password is None else password,
        }

    def sasl_ssl_client_config(self, password: str | None = None) -> dict[str, str]:
        """confluent-kafka config for the SASL_SSL listener: SCRAM-SHA-512 over TLS verified against the
        stack's CA (``ssl.ca.location``). Includes the password; ``password`` overrides it."""
        if not (self.sasl_ssl_bootstrap_servers and self.ssl_ca_file):
            raise StackError(
                "this stack has no SASL_SSL listener; run `scripts/stack up` "
                "(it adds one) or `scripts/stack down && scripts/stack up`"
            )
        return {
            "bootstrap.servers": self.sasl_ssl_bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": self.sasl_ssl_mechanism or "SCRAM-SHA-512",
            "sasl.username": self.sasl_ssl_username or "",
            "sasl.password": (self.sasl_ssl_password or "") if password is None else password,
            "ssl.ca.location": self.ssl_ca_file,
        }

    def kafka_sasl_ssl_connection(self, password: str | None = None) -> dict[str, object]:
        """The SASL_SSL listener as an Airflow connection of the apache-kafka provider's ``kafka`` type
        (its Config Dict holds the password unless ``password`` stands in for it)."""
        return {"conn_type": "kafka", "extra": self.sasl_ssl_client_config(password)}

    def pg_dsn(self, dbname: str | None = None) -> str:
        """libpq key=value DSN (includes the password)."""
        parts = {
            "host": self.pg_host,
            "port": self.pg_port,
            "user": self.pg_user,
            "password": self.pg_password,
            "dbname": dbname or self.pg_database,
        }
        return " ".join(f"{k}={_libpq_quote(str(v))}" for k, v in parts.items())

    def pg_url(self, dbname: str | None = None) -> str:
        """The database as a SQLAlchemy URL (the Iceberg catalog's connection); secret: never log it."""
        from urllib.parse import quote

        return (
            f"postgresql+psycopg2://{quote(self.pg_user, safe='')}:{quote(self.pg_password, safe='')}"
            f"@{self.pg_host}:{self.pg_port}/{dbname or self.pg_database}"
        )

    def airflow_env(self, kafka_sasl_ssl: bool = False) -> dict[str, str]:
        """Airflow connections + provider settings for this stack, as env vars.

        ``kafka_sasl_ssl`` adds the SASL_SSL listener as the connection ``kafka_sasl_ssl`` (password
        included; `scripts/stack env` prints it)."""
        env = {
            "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps(
                {"conn_type": "kafka", "extra": {"bootstrap.servers": self.bootstrap_servers}}
            ),
            "AIRFLOW_CONN_POSTGRES_DEFAULT": json.dumps(
                {
                    "conn_type": "postgres",
                    "host": self.pg_host,
                    "port": self.pg_port,
                    "login": self.pg_user,
                    "password": self.pg_password,
                    "schema": self.pg_database,
                }
            ),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW__KAFKA_OFFSETS__SPARK_JARS": ",".join((*self.connector_jars, *self.s3a_jars)),
            "SPARK_LOCAL_IP": state.LOOPBACK,
        }
        if self.spark_master_url:
            scheme_host, port = self.spark_master_url.rsplit(":", 1)
            env["AIRFLOW_CONN_SPARK_CLUSTER"] = json.dumps(
                {"conn_type": "spark", "host": scheme_host, "port": int(port)}
            )
        if self.spark_connect:
            env[f"AIRFLOW_CONN_{SPARK_CONNECT_CONN_ID.upper()}"] = json.dumps(self.spark_connect)
        for version, conn in self.spark_connect_lines.items():
            env[f"AIRFLOW_CONN_{spark_connect.conn_id(version).upper()}"] = json.dumps(conn)
        if self.s3_endpoint:
            env[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"] = json.dumps(self.s3_connection())
            env["AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID"] = S3_CONN_ID
        if self.schema_registry_url:
            env[f"AIRFLOW_CONN_{SCHEMA_REGISTRY_CONN_ID.upper()}"] = json.dumps(self.schema_registry_connection())
        if self.iceberg_rest_uri:
            env[f"AIRFLOW_CONN_{ICEBERG_REST_CONN_ID.upper()}"] = json.dumps(self.iceberg_rest_connection())
        if kafka_sasl_ssl and self.sasl_ssl_bootstrap_servers:
            env[f"AIRFLOW_CONN_{KAFKA_SASL_SSL_CONN_ID.upper()}"] = json.dumps(self.kafka_sasl_ssl_connection())
        return env


def _libpq_quote(value: str) -> str:
    if value and not any(c in value for c in " '\\"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def from_stack(stack: dict[str, Any]) -> StackInfo:
    """Build a StackInfo from a stack.json record (reads the password file)."""
    pg, kafka, spark = stack["postgres"], stack["kafka"], stack.get("spark") or {}
    return StackInfo(
        bootstrap_servers=f"{kafka['host']}:{kafka['port']}",
        pg_host=pg["host"],
        pg_port=pg["port"],
        pg_user=pg["user"],
        pg_password=Path(pg["password_file"]).read_text().strip(),
        pg_database=pg["database"],
        connector_jars=tuple(stack["connector_jars"]),
        kafka_libs_dir=kafka["libs_dir"],
        spark_master_url=spark.get("master_url"),
        state_dir=stack["state_dir"],
        s3a_jars=tuple(stack.get("s3a_jars", ())),
        spark_connect=spark_connect.connection(stack["spark_connect"]) if stack.get("spark_connect") else None,
        spark_connect_lines={
            version: spark_connect.connection(cfg) for version, cfg in stack.get("spark_connect_lines", {}).items()
        },
        **_sasl(kafka),
        **_sasl_ssl(kafka),
        **_s3(stack.get("s3")),
        **_schema_registry(stack.get("schema_registry")),
        **_iceberg_rest(stack.get("iceberg_rest")),
    )


def _iceberg_rest(ir: dict[str, Any] | None) -> dict[str, Any]:
    if not ir:
        return {}
    return {
        "iceberg_rest_uri": iceberg_rest.url(ir),
        "iceberg_rest_warehouse": ir["warehouse"],
        "iceberg_rest_client_id": ir["client_id"],
        "iceberg_rest_client_secret": iceberg_rest.client_secret(ir),
        "iceberg_rest_token": iceberg_rest.token(ir),
    }


def _schema_registry(sr: dict[str, Any] | None) -> dict[str, Any]:
    if not sr:
        return {}
    return {
        "schema_registry_url": schema_registry.url(sr),
        "schema_registry_user": sr["user"],
        "schema_registry_password": schema_registry.password(sr),
    }


def _s3(s3: dict[str, Any] | None) -> dict[str, Any]:
    if not s3:
        return {}
    creds = seaweedfs.credentials(s3)
    return {
        "s3_endpoint": creds.endpoint,
        "s3_bucket": s3["bucket"],
        "s3_region": creds.region,
        "s3_access_key": creds.access_key,
        "s3_secret_key": creds.secret_key,
    }


def _sasl(kafka: dict[str, Any]) -> dict[str, Any]:
    if not kafka.get("sasl_port"):
        return {}
    return {
        "sasl_bootstrap_servers": f"{kafka['host']}:{kafka['sasl_port']}",
        "sasl_mechanism": kafka.get("sasl_mechanism", "PLAIN"),
        "sasl_username": kafka["sasl_user"],
        "sasl_password": Path(kafka["sasl_password_file"]).read_text().strip(),
    }


def _sasl_ssl(kafka: dict[str, Any]) -> dict[str, Any]:
    if not kafka.get("sasl_ssl_port"):
        return {}
    return {
        "sasl_ssl_bootstrap_servers": f"{kafka['host']}:{kafka['sasl_ssl_port']}",
        "sasl_ssl_mechanism": kafka["sasl_ssl_mechanism"],
        "sasl_ssl_username": kafka["sasl_ssl_user"],
        "sasl_ssl_password": Path(kafka["sasl_ssl_password_file"]).read_text().strip(),
        "ssl_ca_file": kafka["ssl_ca_file"],
    }
