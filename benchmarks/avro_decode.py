"""What decoding Avro costs: the same batch read raw and decoded, on the same warm Spark Connect server.

    PYTHONPATH=.:scripts .venv/bin/python -m benchmarks.avro_decode [--records 1000000] [--repeat 3]
    scripts/bench --only avro [--records 1000000] [--repeat 3]    # the same as a section of the report

Starts the local stack with its Spark Connect server and schema registry if needed, and produces
``--records`` Avro records of about ``--record-bytes`` bytes (key + value) into a topic of
``--partitions`` partitions with confluent-kafka's ``AvroSerializer``: three writer versions of the
subject, in turn (each adds a field with a default), so the batch decodes per writer schema id as
a real topic's would. Then it runs the package's batch (plan, read, commit) over the whole topic as
a pipeline without a decoding (the raw ``value`` bytes), as one with
``value_format={"type": "avro"}`` (the subject's latest version as the reader; the raw value kept
beside the decoded fields, the default) and as one with ``keep_raw_value=False`` too (the raw value
written only for records that do not decode), in turn, after one uncounted batch of each, and prints
the median seconds of each and the decoded ones' ratios to the raw batch (goal: at most 1.30), and
the CPU seconds the Spark Connect server used for each batch (steadier than the wall clock when other
work shares the machine). Every batch is checked:
the committed count is the produced count, and a decoded batch has no decode error. A figure, not a
test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
from typing import Any

from benchmarks.common import CONNECT_CONN_ID, loadavg, median, now, prepare_environment, say

GOAL = 1.30
FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "string"},
    {"name": "seq", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "user_id", "type": "long"},
    {"name": "country", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "note", "type": "string"},
    {"name": "channel", "type": ["null", "string"], "default": None},  # version 2's
    {"name": "region", "type": "string", "default": "eu"},  # version 3's
]
VERSIONS = [{"type": "record", "name": "Event", "namespace": "bench", "fields": FIELDS[: 7 + v]} for v in range(3)]


def produce(info: Any, records: int, partitions: int, record_bytes: int) -> tuple[str, int]:
    """``records`` Avro records into a new topic, writer versions in turn; (topic, key + value bytes)."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S
    from benchmarks.datagen import create_topic, random_filler, send

    topic = create_topic(info.bootstrap_servers, partitions, prefix="bench-avro")
    client = SchemaRegistryClient({**info.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S})
    for version in VERSIONS:
        client.register_schema(f"{topic}-value", Schema(json.dumps(version), "AVRO"))
    conf = {"auto.register.schemas": False}
    serializers = [AvroSerializer(client, json.dumps(v), conf=conf) for v in VERSIONS]
    context = SerializationContext(topic, MessageField.VALUE)
    filler = max(0, record_bytes - 60)  # the key, the header and the other fields take about 60 bytes

    def record(i: int) -> tuple[bytes, bytes]:
        key = f"k{i:012d}".encode()
        fields: dict[str, Any] = {"id": key.decode(), "seq": i, "ts": 1_700_000_000_000 + i, "user_id": i % 1_000_003}
        fields |= {"country": "DE", "amount": i / 100, "note": random_filler(filler // 2 + 1, filler - (i % 17))}
        if i % 3 >= 1:
            fields["channel"] = "app"
        if i % 3 == 2:
            fields["region"] = "us"
        return key, serializers[i % 3](fields, context)

    started = now()
    size = send(info.bootstrap_servers, topic, partitions, (record(i) for i in range(records)))
    say(f"produced {records:,} Avro records ({size / records:.0f} B each) into {topic} in {now() - started:.1f}s")
    return topic, size


KINDS = ("raw", "avro", "avro_no_raw")  # no decoding; decoded, the raw value kept; decoded, keep_raw_value=False


def one_batch(info: Any, ledger: Any, topic: str, records: int, workdir: str, kind: str) -> dict[str, float]:
    """The whole topic as one batch of a new pipeline of ``kind`` (:data:`KINDS`); seconds per step."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from airflow_kafka_offsets.clients.avro_registry import spark_registry_config
    from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
    from airflow_kafka_offsets.clients.schema_registry import RegistryAccess
    from airflow_kafka_offsets.core.spec import build_spec
    from airflow_kafka_offsets.hooks.schema_registry import REQUEST_TIMEOUT_S
    from airflow_kafka_offsets.runtime import settings_runner
    from airflow_kafka_offsets.service.commit import commit_batch
    from airflow_kafka_offsets.service.decoding import next_decode
    from airflow_kafka_offsets.service.plan import plan_batch
    from airflow_kafka_offsets.service.read import run_batch
    from airflow_kafka_offsets.sinks import LocalDirectorySink
    from airflow_kafka_offsets.spark.settings import SparkSettings
    from benchmarks.contenders import ACTOR

    name = f"{kind.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
    avro = kind != "raw"
    value_format = {"type": "avro"} if avro else None
    keep_raw_value = kind != "avro_no_raw"
    spec = build_spec(name, [topic], f"{workdir}/{name}", value_format=value_format, keep_raw_value=keep_raw_value)
    sink = LocalDirectorySink(spec.output_root)
    kafka_props = {"bootstrap.servers": info.bootstrap_servers}
    access = RegistryAccess((info.schema_registry_url,), info.schema_registry_user, info.schema_registry_password)
    settings = SparkSettings(
        conn_id=CONNECT_CONN_ID,
        jars=tuple(info.connector_jars),
        registry_access=lambda conn_id: spark_registry_config(access),
    )
    config = {**info.schema_registry_client_config(), "timeout": REQUEST_TIMEOUT_S}
    writes = WritesCounter()
    cpu0 = server_cpu_s()
    t0 = now()
    decode = next_decode(ledger, spec, sink, lambda conn_id: SchemaRegistryClient(config))
    outcome = plan_batch(ledger, spec, KafkaOffsetsClient(kafka_props).offsets, sink, ACTOR, decode)
    t1 = now()
    assert outcome.plan is not None
    report = run_batch(ledger, sink, outcome.plan, settings_runner(settings), kafka_props, ACTOR)
    t2 = now()
    committed = commit_batch(ledger, sink, spec.name, outcome.plan.batch_id, ACTOR)
    t3 = now()
    cpu = server_cpu_s() - cpu0
    written = writes.close()
    errors = sum(p.decode_errors for p in report.partitions) if report is not None else 0
    if committed.records != records or errors:
        raise RuntimeError(f"{name}: committed {committed.records} records ({errors} decode errors) of {records}")
    return {
        "plan_s": t1 - t0,
        "read_s": t2 - t1,
        "commit_s": t3 - t2,
        "total_s": t3 - t0,
        "server_cpu_s": cpu,
        "writes": written,
    }


def server_cpu_s() -> float:
    """CPU seconds the Spark Connect server's JVM has used (user + system, ``/proc/<pid>/stat``): the batch's
    work, less sensitive than its wall clock to other work on a shared machine; 0.0 where unknown."""
    from devstack import state

    pid = state.load().get("spark_connect", {}).get("pid")
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class WritesCounter:
    """Counts the app's writes of the batch while it is wrapped (one per batch; two when the records carried a
    writer schema id beyond the subject's versions fetched up front); ``close`` unwraps it and gives the count."""

    def __init__(self) -> None:
        from airflow_kafka_offsets.spark_apps import kafka_range_batch as app

        self.app, self.original, self.writes = app, app.write_staged, 0

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.writes += 1
            return self.original(*args, **kwargs)

        app.write_staged = counted

    def close(self) -> int:
        self.app.write_staged = self.original
        return self.writes


def measure(info: Any, records: int, partitions: int, record_bytes: int, repeat: int) -> dict[str, Any]:
    """The section's figures: every batch's seconds, the medians, and the decoded / raw ratios."""
    from benchmarks.common import bench_ledger, drop_ledger

    ledger = bench_ledger(info)
    workdir = tempfile.mkdtemp(prefix="ako-bench-avro-")
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    try:
        topic, size = produce(info, records, partitions, record_bytes)
        say("warming the Connect server with one batch of each kind (not counted)")
        for kind in KINDS:
            one_batch(info, ledger, topic, records, workdir, kind)
        for n in range(repeat):
            for kind in KINDS:
                runs[kind].append(one_batch(info, ledger, topic, records, workdir, kind))
                steps = ", ".join(f"{k} {v:.2f}" for k, v in runs[kind][-1].items())
                say(f"{kind} batch {n + 1}/{repeat}: {steps}")
    finally:
        drop_ledger(ledger)
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {kind: {k: median(r[k] for r in batches) or 0.0 for k in batches[0]} for kind, batches in runs.items()}

    def ratio(kind: str, step: str) -> float:
        return round(medians[kind][step] / (medians["raw"][step] or 1.0), 3)

    def per_round(kind: str) -> list[float]:  # each round's decoded batch against the raw one just before it
        return [round(d["total_s"] / r["total_s"], 3) for d, r in zip(runs[kind], runs["raw"], strict=True)]

    return {
        "records": records,
        "record_bytes": round(size / records),
        "partitions": partitions,
        "repeat": repeat,
        "loadavg_at_end": loadavg(),
        "batches": runs,
        "median_s": medians,
        "ratio_total": ratio("avro", "total_s"),
        "ratio_read": ratio("avro", "read_s"),
        "ratio_server_cpu": ratio("avro", "server_cpu_s"),
        "no_raw_ratio_total": ratio("avro_no_raw", "total_s"),
        "no_raw_ratio_read": ratio("avro_no_raw", "read_s"),
        "no_raw_ratio_server_cpu": ratio("avro_no_raw", "server_cpu_s"),
        "ratio_total_per_round": per_round("avro"),
        "no_raw_ratio_total_per_round": per_round("avro_no_raw"),
        "goal": GOAL,
    }


def summary_line(result: dict[str, Any]) -> str:
    medians = result["median_s"]

    def decoded(kind: str, prefix: str, what: str) -> str:
        ratio = result[f"{prefix}ratio_total"]
        rounds = ", ".join(f"{r:.2f}" for r in result[f"{prefix}ratio_total_per_round"])
        return (
            f"{what} {medians[kind]['total_s']:.2f} s, {ratio:.2f}x raw ({'met' if ratio <= GOAL else 'NOT met'}; "
            f"per round {rounds}; "
            f"read step {result[f'{prefix}ratio_read']:.2f}x; server CPU {medians[kind]['server_cpu_s']:.1f} s, "
            f"{result[f'{prefix}ratio_server_cpu']:.2f}x; writes per batch {medians[kind]['writes']:.0f})"
        )

    return (
        f"{result['records']:,} Avro records of {result['record_bytes']} B, plan to commit on the warm Spark Connect "
        f"server, median of {result['repeat']}: raw {medians['raw']['total_s']:.2f} s (server CPU "
        f"{medians['raw']['server_cpu_s']:.1f} s); {decoded('avro', '', 'decoded, raw value kept')}; "
        f"{decoded('avro_no_raw', 'no_raw_', 'decoded, keep_raw_value=False')}; goal <= {GOAL:.2f}; "
        f"load average {' '.join(map(str, result['loadavg_at_end']))}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.avro_decode", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--record-bytes", type=int, default=500, help="approximate key + value size (default 500)")
    parser.add_argument("--repeat", type=int, default=3, help="timed batches of each kind (default 3)")
    args = parser.parse_args(argv)
    import devstack

    info = devstack.up(spark_connect_server=True)
    prepare_environment(info)
    result = measure(info, args.records, args.partitions, args.record_bytes, args.repeat)
    print(json.dumps(result, indent=1))
    print(summary_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
