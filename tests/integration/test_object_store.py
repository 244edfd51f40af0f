"""The local stack's S3 server (SeaweedFS) and Spark's s3a:// against it, with the stack's real key.

pyarrow's S3 filesystem checks the server from outside Spark; a tiny PySpark app submitted through
SparkBatchSubmitter writes Parquet to s3a:// with the S3A settings of the stack's ``aws`` connection
(carried in the private job file), reports the timeouts and retries its S3A file system got (the
package's, and the task's own conf where it gives one), and pyarrow reads exactly those rows back. Conditional puts are
sent as signed requests (pyarrow cannot send If-None-Match).
"""

from __future__ import annotations

import json
import os
import stat
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import devstack
from airflow_kafka_offsets.hooks.object_storage import ObjectStorageHook
from airflow_kafka_offsets.object_storage.access import s3a_spark_conf
from airflow_kafka_offsets.object_storage.deadlines import S3A_DEADLINES
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.spark.settings import SparkSettings
from devstack.info import S3_CONN_ID
from devstack.s3_request import S3Credentials, S3Request, send

pytestmark = pytest.mark.integration


def s3fs(stack: devstack.StackInfo, secret_key: str | None = None) -> pafs.S3FileSystem:
    creds = stack.s3_credentials()
    return pafs.S3FileSystem(
        access_key=creds.access_key,
        secret_key=secret_key or creds.secret_key,
        endpoint_override=creds.endpoint,
        region=creds.region,
        force_virtual_addressing=False,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    )


def test_the_stack_s3_server_has_its_bucket_and_accepts_only_its_key(stack: devstack.StackInfo) -> None:
    status = devstack.status()
    assert status["services"]["s3"]["alive"] and status["services"]["s3"]["answers"]
    credentials_file = Path(status["connect"]["s3_credentials_file"])
    assert stat.S_IMODE(credentials_file.stat().st_mode) == 0o600
    assert stack.s3_secret_key and stack.s3_secret_key in credentials_file.read_text()
    # the server's logs and data never hold the secret: only its identities file does
    secret = stack.s3_secret_key.encode()
    holders = [p for p in credentials_file.parent.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert holders == [credentials_file]

    fs = s3fs(stack)
    assert fs.get_file_info(stack.s3_bucket).type == pafs.FileType.Directory
    key = f"{stack.s3_bucket}/smoke/{uuid.uuid4().hex}/hello.bin"
    payload = os.urandom(64 * 1024) + b"end"
    with fs.open_output_stream(key) as out:
        out.write(payload)
    with fs.open_input_stream(key) as src:
        assert src.read() == payload
    listed = fs.get_file_info(pafs.FileSelector(key.rsplit("/", 1)[0]))
    assert [(info.path, info.size) for info in listed] == [(key, len(payload))]

    with pytest.raises(OSError, match=r"ACCESS_DENIED|AccessDenied|403"):
        s3fs(stack, secret_key="not-the-secret").get_file_info(key)
    # a bucket is never created implicitly by a write
    with pytest.raises(OSError):
        with fs.open_output_stream(f"no-such-bucket-{uuid.uuid4().hex[:8]}/x") as out:
            out.write(b"x")


def test_the_airflow_connection_of_the_stack_reaches_the_server(stack: devstack.StackInfo) -> None:
    """`scripts/stack env` exports an `aws` connection; read back through Airflow it names this server."""
    conf = ObjectStorageHook(S3_CONN_ID).get_spark_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == stack.s3_endpoint
    assert conf["spark.hadoop.fs.s3a.access.key"] == stack.s3_access_key
    assert conf["spark.hadoop.fs.s3a.secret.key"] == stack.s3_secret_key
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"


def test_conditional_put_if_none_match_refuses_the_second_writer(stack: devstack.StackInfo) -> None:
    """SeaweedFS answers 412 PreconditionFailed to `If-None-Match: *` on an existing key, also in a race."""
    creds = stack.s3_credentials()
    key = f"/{stack.s3_bucket}/conditional/{uuid.uuid4().hex}/_manifest"
    first = send(creds, S3Request("PUT", key, body=b"first", headers={"If-None-Match": "*"}))
    second = send(creds, S3Request("PUT", key, body=b"second", headers={"If-None-Match": "*"}))
    assert (first.status, second.status) == (200, 412)
    assert b"<Code>PreconditionFailed</Code>" in second.body
    assert send(creds, S3Request("GET", key)).body == b"first"

    race_key = f"/{stack.s3_bucket}/conditional/{uuid.uuid4().hex}/_manifest"

    def put(i: int) -> int:
        put_once = S3Request("PUT", race_key, body=f"writer-{i}".encode(), headers={"If-None-Match": "*"})
        return send(creds, put_once).status

    with ThreadPoolExecutor(12) as pool:
        statuses = list(pool.map(put, range(12)))
    winners = [i for i, s in enumerate(statuses) if s == 200]
    assert len(winners) == 1 and sorted(statuses) == [200] + [412] * 11
    assert send(creds, S3Request("GET", race_key)).body == f"writer-{winners[0]}".encode()

    bad = S3Credentials(creds.endpoint, creds.access_key, "not-the-secret", creds.region)
    assert send(bad, S3Request("PUT", f"/{stack.s3_bucket}/conditional/denied", body=b"x")).status == 403


APP = textwrap.dedent(
    """
    import json
    import sys

    from kafka_batch_contract import apply_private_conf
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    with open(sys.argv[sys.argv.index("--job-file") + 1], encoding="utf-8") as handle:
        job = json.load(handle)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    apply_private_conf(job, hadoop)
    rows = [(i, f"id-{i}") for i in range(job["rows"])]
    spark.createDataFrame(rows, "id long, name string").repartition(3).write.parquet(job["output"])
    back = spark.read.parquet(job["output"])
    print(f"s3a-app: wrote and read back {back.count()} rows", flush=True)
    # the S3A file system that wrote them (Hadoop's cache hands back the same one) and its settings
    fs = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(job["output"]).getFileSystem(hadoop)
    settings = {key: fs.getConf().get(key) for key in job["keys"]}
    print("s3a-app: " + json.dumps({"class": fs.getClass().getName(), "settings": settings}), flush=True)
    spark.stop()
    """
)


def test_spark_writes_parquet_to_s3a_with_the_connections_key_and_pyarrow_reads_the_exact_rows(
    stack: devstack.StackInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "s3a_app.py"
    app.write_text(APP)
    prefix = f"{stack.s3_bucket}/spark/{uuid.uuid4().hex}"
    mine = {"spark.hadoop.fs.s3a.retry.limit": "2"}  # the task's own conf: it wins over the package's deadlines
    private = s3a_spark_conf(ObjectStorageHook(S3_CONN_ID).get_conn(), mine)
    settings = SparkSettings(
        jars=(*stack.connector_jars, *stack.s3a_jars), application=str(app), conf=mine, private_conf=private
    )
    job = {"pipeline": "s3a", "batch_id": 1, "attempt_id": uuid.uuid4().hex, "rows": 2500, "output": f"s3a://{prefix}"}
    settings_runner(settings)({**job, "keys": list(S3A_DEADLINES)})

    task_log = capsys.readouterr().out  # the hook logs spark-submit's command line and its output
    assert "s3a-app: wrote and read back 2500 rows" in task_log and "Spark-Submit cmd:" in task_log
    (line,) = [line for line in task_log.splitlines() if "s3a-app: {" in line]
    reported, _ = json.JSONDecoder().raw_decode(line.split("s3a-app: ", 1)[1])  # the log line may go on
    assert "spark.hadoop.fs.s3a.retry.limit" not in private  # the task's own, from the command line
    assert reported == {
        "class": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "settings": {key: private.get(f"spark.hadoop.{key}", "2") for key in S3A_DEADLINES},
    }
    assert stack.s3_secret_key and stack.s3_secret_key not in task_log
    fs = s3fs(stack)
    parts = [i.path for i in fs.get_file_info(pafs.FileSelector(prefix)) if i.path.endswith(".parquet")]
    assert len(parts) == 3
    table = pq.read_table(prefix, filesystem=fs).sort_by("id")
    assert table.schema.names == ["id", "name"]
    assert table.column("id").to_pylist() == list(range(2500))
    assert table.column("name").to_pylist() == [f"id-{i}" for i in range(2500)]
    assert table.column("id").type == pa.int64()


# Serial: it kills the S3 server the other tests share.
@pytest.mark.serial
def test_a_crashed_s3_server_comes_back_with_its_objects_key_and_endpoint(stack: devstack.StackInfo) -> None:
    """`devstack.restart_s3(hard=True)` SIGKILLs SeaweedFS and starts it on the same ports and data."""
    creds = stack.s3_credentials()
    key = f"/{stack.s3_bucket}/restart/{uuid.uuid4().hex}.bin"
    payload = os.urandom(256 * 1024)
    assert send(creds, S3Request("PUT", key, body=payload)).status == 200
    old_pid = devstack.status()["services"]["s3"]["pid"]

    devstack.restart_s3(hard=True)

    after = devstack.current()
    assert devstack.status()["services"]["s3"]["pid"] != old_pid
    assert after.s3_credentials() == creds
    got = send(after.s3_credentials(), S3Request("GET", key))
    assert (got.status, got.body == payload) == (200, True)
