"""What every trial shares: the stack, the ledger schema, the work directory and the run's options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2

import devstack
from airflow_kafka_offsets.ledger import Ledger
from devstack.info import ICEBERG_REST_CONN_ID
from faults_harness.links import Links

PARTITIONS = 3
MODES = ("retry", "next_run")
# three-task: plan >> read >> commit as kafka_ingest_task_group runs them; one-task: KafkaBatchOperator
FORMS = ("three-task", "one-task")
STORAGES = ("local", "s3")
SINKS = (
    "directory",
    "iceberg",
    "delta",
    "iceberg-multi",
    "delta-multi",
    "iceberg-rest",
    "iceberg-rest-multi",
    "iceberg-merge",
    "delta-merge",
    "iceberg-rest-merge",
)
# through the stack's REST catalog server, tables on its S3
REST_SINKS = ("iceberg-rest", "iceberg-rest-multi", "iceberg-rest-merge")
# mirror tables: keyed upserts and tombstones (faults_harness.records.produce_changes) merged by the key "id"
MERGE_SINKS = ("iceberg-merge", "delta-merge", "iceberg-rest-merge")
S3_COMMIT_SINKS = ("directory", "delta", "delta-multi", "delta-merge")
"""Sinks whose batch commit is a PUT to the object store (a manifest, a Delta log entry): ``s3_lost_answer``."""
MIRROR_SCHEMA = "id STRING, n INT"
ROUTED_TABLES = 4  # the multi-table sinks: records go to one of 4 tables by their header "table"
MISSED = "MISSED: "  # how a monitor says the moment for its fault never came


class TrialError(Exception):
    """The pipeline could not be brought to a committed state: a stuck trial."""


@dataclass
class Context:
    """What every trial shares: the stack, the ledger schema, a work directory."""

    info: devstack.StackInfo
    schema: str
    workdir: Path
    batches: int = 2
    records: tuple[int, int] = (100, 250)
    recovery: str = "mixed"
    storage: str = "local"  # local: a directory of the work dir; s3: the stack's bucket
    sink: str = "directory"  # SINKS
    avro: bool = False  # Avro values of three writer versions and corrupted ones (faults_harness.avro_values)
    keep_raw_value: bool = True  # False: the pipeline's keep_raw_value=False (with avro)
    form: str = "three-task"  # the DAG's task form (FORMS)
    # small batches: no Spark UI, few shuffle partitions (the report's groupBy)
    spark_conf: dict[str, str] = field(
        default_factory=lambda: {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "3"}
    )
    env: dict[str, str] = field(default_factory=dict)  # for every worker, e.g. a spark_connect spark_default
    links: Links | None = None  # --network: every worker's connections go through toxiproxy (faults_harness.links)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.airflow_home = self.workdir / "airflow-home"
        self.airflow_home.mkdir(exist_ok=True)

    @property
    def on_spark_connect(self) -> bool:
        """The read steps run on a Spark Connect server (the workers' spark_default is one)."""
        return "AIRFLOW_CONN_SPARK_DEFAULT" in self.env

    @property
    def steps(self) -> tuple[str, ...]:
        """A DAG run's tasks, in order (each a worker process, each retried)."""
        return ("batch",) if self.form == "one-task" else ("plan", "read", "commit")

    def ledger(self) -> Ledger:
        dsn = self.info.pg_dsn()
        return Ledger(lambda: psycopg2.connect(dsn), schema=self.schema, catalog_uri=self.info.pg_url())

    def output_root(self, local_dir: Path) -> str:
        if self.storage == "s3":
            if not self.info.s3_bucket:
                raise TrialError("--storage s3 needs the stack's S3 server: run `scripts/stack up`")
            return f"s3://{self.info.s3_bucket}/faults/{self.schema}"  # one root per run: pipelines are unique
        return str(local_dir / "out")

    def sink_option(self, pipeline: str) -> dict[str, Any] | None:
        """The plan step's ``sink``: a table of the trial's own for the table formats."""
        table = pipeline.replace("-", "_")
        sink_format = self.sink.split("-", 1)[0]
        namespace, options = "faults", {}
        if self.sink in REST_SINKS:  # the REST catalog outlives the ledger schema that names the SQL catalog
            namespace, options = self.schema, {"catalog_conn_id": ICEBERG_REST_CONN_ID}
        if self.sink in MERGE_SINKS:
            options |= {"merge_key": "id", "changes": "upsert"}
        if self.sink.endswith("-multi"):
            prefix = f"{namespace}.{table}_" if sink_format == "iceberg" else f"{table}_"
            allow = [f"{prefix}t{i}" for i in range(ROUTED_TABLES)]
            return {"format": sink_format, "route": {"pattern": prefix + "{header:table}", "allow": allow}, **options}
        if sink_format == "iceberg":
            return {"format": "iceberg", "table": f"{namespace}.{table}", **options}
        if sink_format == "delta":
            return {"format": "delta", "table": table, **options}
        return None

    @property
    def json_schema(self) -> str | None:
        """The plan step's ``json_schema``: a mirror's rows are the decoded values."""
        return MIRROR_SCHEMA if self.sink in MERGE_SINKS else None

    def pg(self) -> Any:  # a psycopg2 connection
        return psycopg2.connect(self.info.pg_dsn())
