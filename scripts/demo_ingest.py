"""Drive the example DAG against the running local stack while a producer keeps writing.

Run through ``scripts/demo``; it prints the ledger and checks that every
produced id is in the committed output exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg2
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

import devstack
from airflow_kafka_offsets.errors import PipelineNotFoundError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.object_storage.access import s3_access
from airflow_kafka_offsets.object_storage.storage import Storage, location_uri
from airflow_kafka_offsets.readers import committed_outputs, read_output
from devstack import report
from devstack.state import state_dir

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOPIC = "demo-events"
PIPELINE = "demo_events"
SCHEMA = "kafka_offsets"
TABLES = {"iceberg": "demo.events", "delta": "demo_events"}


def pipeline_name(sink_format: str) -> str:
    """One pipeline per sink: a pipeline's sink never changes."""
    return PIPELINE if sink_format == "directory" else f"{PIPELINE}_{sink_format}"


def ensure_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if TOPIC not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(timeout=30)


class BackgroundProducer(threading.Thread):
    """Keeps producing JSON events with unique ids until stopped."""

    def __init__(self, bootstrap: str, rate_per_s: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
        self.rate = rate_per_s
        self.stop_event = threading.Event()
        self.ids: list[str] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            for _ in range(self.rate // 10):
                rid = uuid.uuid4().hex
                event = {"id": rid, "ts": time.time(), "kind": "click", "payload": "x" * 64}
                self.producer.produce(TOPIC, key=rid.encode(), value=json.dumps(event).encode())
                self.ids.append(rid)
            self.producer.poll(0)
            time.sleep(0.1)
        self.producer.flush(30)


def airflow_env(info: devstack.StackInfo, output: str, home: Path, sink_format: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(info.airflow_env())
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC": TOPIC,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE": pipeline_name(sink_format),
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT": output,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_SINK_FORMAT": sink_format,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TABLE": TABLES.get(sink_format, ""),
            "AIRFLOW__KAFKA_OFFSETS__LEDGER_SCHEMA": SCHEMA,
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    return env


def run(cmd: list[str], env: dict[str, str], quiet: bool = False) -> None:
    result = subprocess.run(cmd, env=env, capture_output=quiet, text=True)
    if result.returncode != 0:
        if quiet:
            print(result.stdout[-4000:], result.stderr[-4000:], sep="\n")
        raise SystemExit(f"demo: {' '.join(cmd[:3])} failed with exit code {result.returncode}")


def committed_keys(info: devstack.StackInfo, sink_format: str, output: str) -> Counter[str]:
    """Keys in the committed output, read as the README tells readers to: the ledger's committed
    batches (on S3, the files each batch's ``_manifest`` lists), or the table (PyIceberg /
    delta-rs, which know nothing of the ledger)."""
    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=SCHEMA)
    ledger.migrate()  # a no-op once the first DAG run has created the ledger
    s3 = s3_access("s3", info.s3_access_key, info.s3_secret_key, info.s3_connection()["extra"])
    keys: Counter[str] = Counter()
    if sink_format == "directory":
        try:
            outputs = committed_outputs(ledger, PIPELINE)
        except PipelineNotFoundError:  # no DAG run yet
            return keys
        for batch in outputs:
            keys.update(key.decode() for key in read_output(batch, s3).column("key").to_pylist())
        return keys
    storage = Storage(s3)
    try:
        if sink_format == "iceberg":
            catalog = SqlCatalog(SCHEMA, uri=info.pg_url(), **storage.pyiceberg_properties())
            table = catalog.load_table(TABLES["iceberg"]).scan(selected_fields=("key",)).to_arrow()
        else:
            location = f"{location_uri(output)}/{TABLES['delta']}"
            table = DeltaTable(location, storage_options=storage.delta_storage_options()).to_pyarrow_table(
                columns=["key"]
            )
    except (NoSuchTableError, TableNotFoundError):  # no DAG run yet
        return keys
    keys.update(key.decode() for key in table.column("key").to_pylist())
    return keys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="DAG runs while records arrive")
    parser.add_argument("--rate", type=int, default=500, help="records per second produced meanwhile")
    parser.add_argument(
        "--sink", choices=["directory", "iceberg", "delta"], default="directory", help="where batches land"
    )
    parser.add_argument("--s3", action="store_true", help="write to the stack's S3 server")
    args = parser.parse_args()

    info = devstack.current()
    # The stack's state dir by default: Airflow's home and the output live and go with the ledger
    # they belong to (`scripts/stack down` removes them together).
    work = Path(os.environ.get("AKO_DEMO_DIR") or state_dir() / "demo")
    output = f"s3://{info.s3_bucket}/demo" if args.s3 else str(work / "output")
    env = airflow_env(info, output, work / "airflow-home", args.sink)
    (work / "airflow-home").mkdir(parents=True, exist_ok=True)
    print(f"demo: Airflow home {work / 'airflow-home'}, output {output}")
    run([str(BIN / "airflow"), "db", "migrate"], env, quiet=True)
    ensure_topic(info.bootstrap_servers, partitions=3)
    before = committed_keys(info, args.sink, output)

    producer = BackgroundProducer(info.bootstrap_servers, args.rate)
    producer.start()
    for n in range(1, args.runs + 1):
        time.sleep(3)
        print(
            f"\ndemo: DAG run {n} of {args.runs} while the producer keeps writing "
            f"({len(producer.ids)} records produced so far)",
            flush=True,
        )
        run([str(BIN / "airflow"), "dags", "test", "kafka_ingest_example"], env, quiet=True)
    producer.stop_event.set()
    producer.join()
    print(f"\ndemo: producer stopped after {len(producer.ids)} records; one last run drains the rest", flush=True)
    run([str(BIN / "airflow"), "dags", "test", "kafka_ingest_example"], env, quiet=True)

    print()
    pipeline = pipeline_name(args.sink)
    run([str(BIN / "airflow-kafka-offsets"), "status", pipeline, "--ledger-schema", SCHEMA], env)
    keys = committed_keys(info, args.sink, output) - before
    produced = set(producer.ids)
    duplicated = sum(1 for k in produced if keys[k] > 1)
    lost = sum(1 for k in produced if keys[k] == 0)
    print(
        f"\ndemo: produced {len(produced)} records in this demo; committed output holds "
        f"{sum(keys[k] for k in produced)} of them: lost {lost}, duplicated {duplicated}"
    )
    if args.sink == "directory":
        published = "the files each batch=*/_manifest lists" if args.s3 else "batch=*/"
        print(f"demo: Parquet output under {output}/{PIPELINE}/: {published}")
    else:
        print(f"demo: {args.sink} table {TABLES[args.sink]} under {output}, read without the ledger")
    print("\n" + report.left_running(report.status()))
    return 1 if lost or duplicated else 0


if __name__ == "__main__":
    sys.exit(main())
