"""What readers that do not know the ledger read: the documented way for each sink.

- a directory sink on S3: list ``<root>/<pipeline>/batch=*/_manifest`` and read exactly the files
  each manifest names (plain JSON and pyarrow, as a reader without this package would);
- Iceberg: PyIceberg's SqlCatalog (the catalog is named after the ledger's schema), or its RestCatalog
  with the stack's REST catalog server's bearer token for a sink whose ``catalog_conn_id`` is that server's;
- Delta: delta-rs.

Shared by the fault harness and the integration tests.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import devstack
from airflow_kafka_offsets.core.model import PipelineSpec
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.runtime import object_storage
from devstack.info import ICEBERG_REST_CONN_ID

COMMIT_KEYS = ("kafka-offsets.operation", "kafka-offsets.batch", "kafka-offsets.attempt")
REST_CONN_ENV = f"AIRFLOW_CONN_{ICEBERG_REST_CONN_ID.upper()}"  # the stack's REST catalog connection


def manifest_listing(fs: pafs.FileSystem, prefix: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Every ``batch=*/_manifest`` under ``prefix`` (a pipeline's directory, bucket/path), and the rows
    of the files each lists."""
    infos = fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    manifests = sorted(i.path for i in infos if i.path.endswith("/_manifest"))
    rows: list[dict[str, Any]] = []
    for path in manifests:
        with fs.open_input_stream(path) as stream:
            listed = json.loads(stream.read())["files"]
        for entry in listed:
            rows += pq.read_table(entry["uri"].removeprefix("s3://"), filesystem=fs).to_pylist()
    return manifests, rows


def _storage(spec: PipelineSpec) -> files.Storage:
    return files.Storage(object_storage(spec.output_root))


def iceberg_catalog(catalog_uri: str, catalog_name: str, spec: PipelineSpec) -> Catalog:
    """The pipeline's Iceberg catalog, as a client that knows nothing of the ledger opens it."""
    if spec.sink.catalog_conn_id is None:
        return SqlCatalog(catalog_name, uri=catalog_uri, **_storage(spec).pyiceberg_properties())
    if spec.sink.catalog_conn_id != ICEBERG_REST_CONN_ID:
        raise ValueError(f"no reader for the catalog connection {spec.sink.catalog_conn_id!r}")
    return rest_reader(devstack.current())


def rest_reader(info: devstack.StackInfo) -> RestCatalog:
    """The stack's REST catalog as a client that knows nothing of the ledger opens it: the bearer token,
    the S3 credentials the catalog vends."""
    if not (info.iceberg_rest_uri and info.iceberg_rest_token and info.s3_endpoint):
        raise ValueError("the stack has no REST catalog server: run `scripts/stack up`")
    s3 = {"s3.endpoint": info.s3_endpoint, "s3.region": info.s3_region or "us-east-1"}
    return RestCatalog("reader", uri=info.iceberg_rest_uri, token=info.iceberg_rest_token, **s3)


def iceberg_table(catalog_uri: str, catalog_name: str, spec: PipelineSpec) -> Table:
    assert spec.sink.table is not None, "an Iceberg sink names its table"
    return iceberg_catalog(catalog_uri, catalog_name, spec).load_table(spec.sink.table)


def delta_table(spec: PipelineSpec) -> DeltaTable:
    location = files.join(files.location_uri(spec.output_root), spec.sink.table or "")
    return DeltaTable(location, storage_options=_storage(spec).delta_storage_options())


def read_table(catalog_uri: str, catalog_name: str, spec: PipelineSpec) -> pa.Table:
    """The pipeline's table as an engine without the ledger reads it."""
    if spec.sink.format.value == "iceberg":
        return iceberg_table(catalog_uri, catalog_name, spec).scan().to_arrow()
    return delta_table(spec).to_pyarrow_table()


def table_commits(catalog_uri: str, catalog_name: str, spec: PipelineSpec) -> list[dict[str, str]]:
    """(operation, batch, attempt) of the pipeline's commits in the table's history, oldest first."""
    if spec.sink.format.value == "iceberg":
        commits: list[dict[str, str]] = []
        follows_append = True
        for snapshot in iceberg_table(catalog_uri, catalog_name, spec).snapshots():
            if snapshot.summary is None:
                continue
            properties = snapshot.summary.additional_properties  # as the delta branch: str to str
            commit = {k: properties[k] for k in COMMIT_KEYS} if COMMIT_KEYS[1] in properties else None
            # one catalog commit of a mirror's merge is its deletes' snapshot, then its rows' append
            if commit is not None and not (commits and commits[-1] == commit and not follows_append):
                commits.append(commit)
            follows_append = snapshot.summary.operation.value == "append"
        return commits
    history = delta_table(spec).history()
    return [{k: c[k] for k in COMMIT_KEYS} for c in reversed(history) if COMMIT_KEYS[1] in c]
