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
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg2
import pyarrow.dataset as ds
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import devstack
from airflow_kafka_offsets.errors import BatchNotFoundError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.readers import committed_outputs

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOPIC = "demo-events"
PIPELINE = "demo_events"
SCHEMA = "kafka_offsets"


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


def airflow_env(info: devstack.StackInfo, output: Path, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(info.airflow_env())
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_TOPIC": TOPIC,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_PIPELINE": PIPELINE,
            "AIRFLOW_VAR_KAFKA_OFFSETS_DEMO_OUTPUT": str(output),
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


def committed_keys(info: devstack.StackInfo) -> Counter:
    """Keys in the output of every committed batch, read as the README tells readers to."""
    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=SCHEMA)
    ledger.migrate()  # a no-op once the first DAG run has created the ledger
    try:
        outputs = committed_outputs(ledger, PIPELINE)
    except BatchNotFoundError:  # no DAG run yet
        return Counter()
    keys: Counter = Counter()
    for output in outputs:
        table = ds.dataset(output.path, format="parquet").to_table(columns=["key"])
        keys.update(key.decode() for key in table.column("key").to_pylist())
    return keys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="DAG runs while records arrive")
    parser.add_argument("--rate", type=int, default=500, help="records per second produced meanwhile")
    args = parser.parse_args()

    info = devstack.current()
    work = Path(os.environ.get("AKO_DEMO_DIR", Path(tempfile.gettempdir()) / "ako-demo"))
    output = work / "output"
    env = airflow_env(info, output, work / "airflow-home")
    (work / "airflow-home").mkdir(parents=True, exist_ok=True)
    print(f"demo: Airflow home {work / 'airflow-home'}, output {output}")
    run([str(BIN / "airflow"), "db", "migrate"], env, quiet=True)
    ensure_topic(info.bootstrap_servers, partitions=3)
    before = committed_keys(info)

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
    run([str(BIN / "airflow-kafka-offsets"), "status", PIPELINE, "--ledger-schema", SCHEMA], env)
    keys = committed_keys(info) - before
    produced = set(producer.ids)
    duplicated = sum(1 for k in produced if keys[k] > 1)
    lost = sum(1 for k in produced if keys[k] == 0)
    print(
        f"\ndemo: produced {len(produced)} records in this demo; committed output holds "
        f"{sum(keys[k] for k in produced)} of them: lost {lost}, duplicated {duplicated}"
    )
    print(f"demo: Parquet output under {output}/{PIPELINE}/batch=*/")
    return 1 if lost or duplicated else 0


if __name__ == "__main__":
    sys.exit(main())
