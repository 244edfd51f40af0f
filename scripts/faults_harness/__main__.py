"""Fault-injection trials of airflow-kafka-offsets on the local stack (``scripts/faults``).

Prints one line per trial as it ends, then per fault kind
``<kind>: trials N, lost L, duplicated D (failed F, faults fired X/N)``; exits 1 on any
loss, duplicate or failed trial (a pipeline that recovery could not bring to a committed
state, a stray output directory, a ledger gap...).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import devstack
from devstack.toxiproxy_api import Client
from faults_harness.context import FORMS, MODES, REST_SINKS, S3_COMMIT_SINKS, SINKS, STORAGES, Context
from faults_harness.kinds import CHAINABLE, KINDS
from faults_harness.links import Links
from faults_harness.network_kinds import NETWORK_KINDS
from faults_harness.procs import kill_everything_started
from faults_harness.results import TrialResult, describe, kinds_of, summarize
from faults_harness.trial import run_trial

# kinds that kill spark-submit's processes or wait for them: a Spark Connect read has none of its own
SPARK_PROCESS_KINDS = (
    "during_spark_read",
    "during_parquet_write",
    "spark_orphaned",
    "postgres_restart",
    "kafka_restart",
)
S3_KINDS = ("s3_restart", "s3_blackhole")  # need the output on the stack's S3 server
AVRO_KINDS = ("registry_cut",)  # need an Avro pipeline (its schema registry)
REST_KINDS = ("catalog_restart",)  # need a sink in the stack's REST catalog (REST_SINKS)
CONNECT_KINDS = ("connect_reset", "connect_blackhole")  # need the reads on the Spark Connect server (its link)
S3_COMMIT_KINDS = ("s3_lost_answer",)  # need a sink whose commit is a PUT to S3 (S3_COMMIT_SINKS)


def parse_kinds(value: str) -> list[str]:
    if value in ("", "all"):
        return []  # every kind that applies
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS and not set(kinds_of(k)) <= {*CHAINABLE, *NETWORK_KINDS}]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}; chains k1+k2+... of "
            f"{', '.join(CHAINABLE)} (and of the network kinds) hit successive tries of one batch"
        )
    return kinds


def run(
    trials: int = 1,
    kinds: list[str] | None = None,
    seed: int | None = None,
    batches: int = 2,
    records: tuple[int, int] = (100, 250),
    recovery: str = "mixed",
    workdir: Path | None = None,
    keep: bool = False,
    shuffle: bool = True,
    out: Callable[..., object] = print,
    spark_connect: dict[str, Any] | None = None,
    storage: str = "local",
    sink: str = "directory",
    avro: bool = False,
    form: str = "three-task",
    keep_raw_value: bool = True,
    network: bool = False,
) -> tuple[list[TrialResult], list[str], bool]:
    """Run the trials against the running stack (``devstack.current()``); returns results, summary, ok.

    ``spark_connect``: a ``spark_connect`` connection the read steps use as ``spark_default``.
    ``storage``: the output on local disk or on the stack's S3 bucket; ``sink``: its format.
    ``avro``: the topics carry Avro values of three writer versions and corrupted records, decoded through
    the stack's schema registry (:mod:`faults_harness.avro_values`); ``keep_raw_value`` False writes their
    values only where they did not decode. ``form``: the DAG's task form,
    ``three-task`` (plan >> read >> commit) or ``one-task`` (``KafkaBatchOperator``). ``network``: every
    worker's connections go through the stack's toxiproxy (started here if needed; with ``spark_connect``, the
    Connect server's link too, else spark-submit's Kafka, S3 and registry links) and the kinds are the network
    kinds (:mod:`faults_harness.network_kinds`) unless ``kinds`` says.
    """
    left_out = (
        (tuple(NETWORK_KINDS) if not network else ())
        + (SPARK_PROCESS_KINDS if spark_connect else ())
        + (CONNECT_KINDS if not spark_connect else ())
        + (S3_KINDS if storage != "s3" else ())
        + (REST_KINDS if sink not in REST_SINKS else ())
        + (S3_COMMIT_KINDS if storage != "s3" or sink not in S3_COMMIT_SINKS else ())
        + (AVRO_KINDS if not avro else ())
    )
    kinds = kinds or [k for k in (NETWORK_KINDS if network else KINDS) if k not in left_out]
    seed = seed if seed is not None else random.SystemRandom().randrange(1_000_000)
    info = devstack.current()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ako-faults-"))
    ctx = Context(
        info,
        schema=f"faults_{uuid.uuid4().hex[:8]}",
        workdir=workdir,
        batches=batches,
        records=records,
        recovery=recovery,
        storage=storage,
        sink=sink,
        avro=avro,
        keep_raw_value=keep_raw_value,
        form=form,
    )
    for name, value in info.airflow_env().items():  # the harness reads the output as the workers write it
        os.environ.setdefault(name, value)
    os.environ.setdefault("AIRFLOW_HOME", str(ctx.airflow_home))
    if spark_connect:  # a session may change SQL settings only
        ctx.env = {"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark_connect)}
        ctx.spark_conf = {"spark.sql.shuffle.partitions": "3"}
    if network:
        proxied = devstack.start_toxiproxy()
        ctx.links = Links(Client(proxied.api_url), proxied.env)
        ctx.links.heal()
        ctx.env |= proxied.env
        if spark_connect:
            ctx.env["AIRFLOW_CONN_SPARK_DEFAULT"] = proxied.env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"]
    ctx.ledger().migrate()
    order = [(kind, i) for i in range(trials) for kind in kinds]
    if shuffle:
        random.Random(seed).shuffle(order)
    out(
        f"faults: {len(order)} trials ({trials} of each of {', '.join(kinds)}), seed {seed}, {batches} batches "
        f"per trial{', one-task form' if form == 'one-task' else ''}"
        f"{', every link through toxiproxy' if network else ''}, {sink} sink on {storage} storage"
        f"{', Avro values' if avro else ''}{' (keep_raw_value=False)' if not keep_raw_value else ''}, "
        f"ledger schema {ctx.schema}, "
        f"work dir {workdir}",
        flush=True,
    )
    results: list[TrialResult] = []
    try:
        for kind, i in order:
            result = run_trial(ctx, kind, i, seed)
            results.append(result)
            out(describe(result), flush=True)
            if result.ok and not keep and result.directory is not None:
                shutil.rmtree(result.directory, ignore_errors=True)
    finally:
        kill_everything_started()
    lines, ok = summarize(results, kinds)
    out("", flush=True)
    for line in lines:
        out(line, flush=True)
    if ok and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not ok:
        out(f"faults: logs and outputs of failed trials kept in {workdir} (ledger schema {ctx.schema})", flush=True)
    return results, lines, ok


def refusal(args: argparse.Namespace) -> str | None:
    """Why the options cannot run together (a kind asked for without what it needs), or None."""
    asked = {k for chain in args.kinds for k in kinds_of(chain)}

    def of(kinds: tuple[str, ...] | dict[str, Any]) -> str:
        return ", ".join(sorted(asked & set(kinds)))

    checks = [
        (
            args.spark_connect and of(SPARK_PROCESS_KINDS),
            "{} kill or wait for spark-submit's processes: not with --spark-connect",
        ),
        (
            not args.spark_connect and of(CONNECT_KINDS),
            "{} resets the Spark Connect server's link: only with --spark-connect",
        ),
        (args.storage != "s3" and of(S3_KINDS), "{} faults the S3 server under the output: only with --storage s3"),
        (not args.avro and of(AVRO_KINDS), "{} cuts an Avro pipeline's schema registry: only with --avro"),
        (
            args.sink in REST_SINKS and args.storage != "s3",
            f"--sink {args.sink}: the REST catalog's tables are on the stack's S3: only with --storage s3",
        ),
        (
            (args.storage != "s3" or args.sink not in S3_COMMIT_SINKS) and of(S3_COMMIT_KINDS),
            "{} loses the answer of a batch's commit PUT to S3: only with --storage s3 and --sink "
            + " or ".join(S3_COMMIT_SINKS),
        ),
        (
            args.sink not in REST_SINKS and of(REST_KINDS),
            "{} restarts the REST catalog: only with --sink " + " or ".join(REST_SINKS),
        ),
        (
            args.no_raw_value and not args.avro,
            "--no-raw-value needs --avro: without a decoding the raw value is the record",
        ),
        (not args.network and of(NETWORK_KINDS), "{} cut the workers' links through toxiproxy: only with --network"),
    ]
    for failing, message in checks:
        if failing:
            return message.format(failing) if isinstance(failing, str) else message
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/faults", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1, help="trials of each fault kind (default 1)")
    parser.add_argument(
        "--kinds",
        type=parse_kinds,
        default=[],
        help=f"comma-separated fault kinds or 'all' (default); known: {', '.join(KINDS)}",
    )
    parser.add_argument(
        "--spark-connect",
        action="store_true",
        help="read on the stack's Spark Connect server (spark_default of type spark_connect); "
        f"{', '.join(SPARK_PROCESS_KINDS)} do not apply",
    )
    parser.add_argument(
        "--network",
        action="store_true",
        help="every worker's links through the stack's toxiproxy (started if needed): the network fault kinds "
        f"{', '.join(NETWORK_KINDS)} (default all of them; {', '.join(CONNECT_KINDS)} with --spark-connect only); "
        "the reads run through spark-submit, or on the Spark Connect server with --spark-connect",
    )
    parser.add_argument(
        "--form",
        choices=FORMS,
        default="three-task",
        help="the DAG's task form: three-task (default; plan, read and commit each a task, as "
        "kafka_ingest_task_group) or one-task (KafkaBatchOperator: the whole batch in one task, its "
        "retries replaying the planned batch); every fault kind applies to both",
    )
    parser.add_argument(
        "--storage",
        choices=STORAGES,
        default="local",
        help="where the output goes: local (default; a directory of the work dir) or s3 (the stack's bucket); "
        f"{', '.join(S3_KINDS)} needs s3",
    )
    parser.add_argument(
        "--sink",
        choices=SINKS,
        default="directory",
        help="the pipelines' sink: directory (Parquet directories, default), iceberg or delta (a table per trial), "
        "iceberg-multi or delta-multi (4 tables per trial, records routed by a header); iceberg-rest and "
        "iceberg-rest-multi: the same in the stack's Iceberg REST catalog (with --storage s3); iceberg-merge and "
        "delta-merge: a mirror table of keyed upserts and tombstones (merge_key id, changes upsert); "
        "iceberg-rest-merge: that mirror in the REST catalog (with --storage s3)",
    )
    parser.add_argument(
        "--avro",
        action="store_true",
        help="Avro values (3 writer versions through the stack's schema registry, plus corrupted records): "
        "every id must land once with its fields typed, every corrupted record as a decode error at its offset",
    )
    parser.add_argument(
        "--no-raw-value",
        action="store_true",
        help="with --avro: the pipeline's keep_raw_value=False (values written only where they did not decode)",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (timings, variants, order)")
    parser.add_argument(
        "--batches",
        type=int,
        default=2,
        help="batches (waves of records) per trial; the fault hits one of them (default 2)",
    )
    parser.add_argument("--records", default="100-250", help="records per wave, MIN-MAX (default 100-250)")
    parser.add_argument(
        "--recovery",
        choices=("mixed", *MODES),
        default="mixed",
        help="retry: the faulted task is retried; next_run: the run fails and the next run "
        "recovers; mixed (default): alternate",
    )
    parser.add_argument("--keep", action="store_true", help="keep outputs and logs of passing trials too")
    parser.add_argument("--keep-stack", action="store_true", help="leave a stack this command started running")
    parser.add_argument("--list", action="store_true", help="list the fault kinds and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(KINDS))
        return 0
    refused = refusal(args)
    if refused:
        parser.error(refused)
    low, _, high = args.records.partition("-")
    records = (int(low), int(high or low))
    if args.trials < 1 or args.batches < 1 or records[0] < 1 or records[1] < records[0]:
        parser.error("--trials, --batches and --records must be positive")
    try:
        started_here = not devstack.status().get("up")
    except devstack.StackError:
        started_here = True
    info = devstack.up(spark_connect_server=args.spark_connect)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    # verify's sweep: noise
    logging.getLogger("airflow_kafka_offsets.service.operations.sweep").setLevel(logging.WARNING)
    for name in ("httpx", "httpx2"):  # the registry client's every request (--avro): noise
        logging.getLogger(name).setLevel(logging.WARNING)
    print(f"faults: stack {info!r}", flush=True)
    began = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup in the finally blocks
    try:
        connect = info.spark_connect if args.spark_connect else None
        _, _, ok = run(
            args.trials,
            args.kinds,
            args.seed,
            args.batches,
            records,
            args.recovery,
            keep=args.keep,
            spark_connect=connect,
            storage=args.storage,
            sink=args.sink,
            avro=args.avro,
            form=args.form,
            keep_raw_value=not args.no_raw_value,
            network=args.network,
        )
    finally:
        if started_here and not args.keep_stack:
            devstack.down()
    print(f"faults: {'PASSED' if ok else 'FAILED'} in {time.monotonic() - began:.0f}s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
