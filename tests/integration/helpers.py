"""Producing records with unique ids and reading back what the ledger says was committed."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psycopg2
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import devstack
from airflow_kafka_offsets.ledger import Ledger


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    partitions: int,
    tag: str = "",
    transactional: bool = False,
    client_config: dict[str, str] | None = None,
) -> list[dict]:
    """Produce ``count`` records round-robin over partitions; returns what was acknowledged, with offsets.

    ``transactional``: in one Kafka transaction, so a plan sees all of them or none (each partition
    then also gets a commit marker, one offset). ``client_config``: the listener's security settings
    (e.g. the stack's ``sasl_ssl_client_config()``)."""
    config = {"bootstrap.servers": bootstrap, **(client_config or {}), "enable.idempotence": True, "linger.ms": 5}
    producer = Producer({**config, "transactional.id": uuid.uuid4().hex} if transactional else config)
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    acked: list[dict] = []

    def on_delivery(err, msg):
        assert err is None, err
        acked.append({"id": msg.key().decode(), "partition": msg.partition(), "offset": msg.offset()})

    for i in range(count):
        rid = f"{tag}{uuid.uuid4().hex}"
        producer.produce(
            topic,
            key=rid.encode(),
            value=json.dumps({"id": rid, "n": i}).encode(),
            partition=i % partitions,
            headers=[("source", b"test"), ("seq", str(i).encode())],
            on_delivery=on_delivery,
        )
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    if transactional:
        producer.commit_transaction(30)
    assert len(acked) == count
    return acked


def local_path(uri: str) -> Path:
    return Path(urlparse(uri).path)


def committed_rows(ledger: Ledger, pipeline: str) -> list[dict]:
    """Every record in the outputs of the pipeline's committed batches (what a ledger-following reader sees)."""
    rows: list[dict] = []
    for record in ledger.committed_batches(pipeline):
        path = local_path(record.plan.output_uri)
        if not record.plan.readable_ranges:
            continue
        table = pq.read_table(path)
        rows.extend(table.to_pylist())
    return rows


def assert_exactly_once(rows: list[dict], produced: list[dict]) -> None:
    keys = Counter(r["key"].decode() for r in rows)
    duplicated = {k: n for k, n in keys.items() if n > 1}
    expected = {p["id"] for p in produced}
    lost = expected - set(keys)
    unexpected = set(keys) - expected
    assert not duplicated, f"{len(duplicated)} ids duplicated, e.g. {list(duplicated)[:3]}"
    assert not lost, f"{len(lost)} ids lost, e.g. {list(lost)[:3]}"
    assert not unexpected, f"{len(unexpected)} unexpected ids, e.g. {list(unexpected)[:3]}"
    by_id = {p["id"]: p for p in produced}
    for r in rows:
        p = by_id[r["key"].decode()]
        assert (r["partition"], r["offset"]) == (p["partition"], p["offset"])


def statistics_per_column(directory: Path, columns: list[str]) -> dict[str, set[bool]]:
    """Per column, the set of whether its chunks carry statistics, over every Parquet file under
    ``directory``: {True} when all of them do, {False} when none does."""
    chunks: dict[str, set[bool]] = {name: set() for name in columns}
    files = sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith((".", "_")))
    assert files, f"no Parquet files under {directory}"
    for file in files:
        meta = pq.ParquetFile(file).metadata
        for group in range(meta.num_row_groups):
            for index in range(meta.num_columns):
                column = meta.row_group(group).column(index)
                if column.path_in_schema in chunks:
                    chunks[column.path_in_schema].add(column.is_stats_set)
    return chunks


def ledger_ranges(ledger: Ledger, pipeline: str) -> list[tuple]:
    with ledger.transaction() as tx:
        return tx.fetchall(
            "SELECT b.batch_id, b.state, r.topic, r.partition, r.cursor_offset, r.start_offset, r.end_offset, r.records"
            " FROM {s}.batch_ranges r JOIN {s}.batches b USING (pipeline, batch_id)"
            " WHERE r.pipeline = %s ORDER BY b.batch_id, r.topic, r.partition",
            (pipeline,),
        )


def range_bytes(ledger: Ledger, pipeline: str) -> list[tuple[int, int, int]]:
    """(partition, records, key + value bytes) of each of the pipeline's ranges, from the ledger."""
    with ledger.transaction() as tx:
        rows = tx.fetchall(
            "SELECT partition, records, payload_bytes FROM {s}.batch_ranges WHERE pipeline = %s"
            " ORDER BY batch_id, topic, partition",
            (pipeline,),
        )
    return [(int(p), int(r), int(b)) for p, r, b in rows]


def payload_per_partition(produced: list[dict], partitions: int) -> dict[int, int]:
    """Key + value bytes per partition of :func:`produce`'s records (value ``{"id": id, "n": i}``,
    record ``i`` in partition ``i % partitions``)."""
    key_bytes = len(produced[0]["id"])  # every id of one call has the same length
    totals = dict.fromkeys(range(partitions), 0)
    for i in range(len(produced)):
        totals[i % partitions] += 2 * key_bytes + len(json.dumps({"id": "", "n": i}).encode())
    return totals


class Refusal:
    """What :func:`refused` caught: ``value`` is the package's own error."""

    value: BaseException


@contextmanager
def refused(exc_type: type[BaseException], match: str | None = None) -> Iterator[Refusal]:
    """The package's ``exc_type`` error, raised directly or (from an operator) as the cause of the
    AirflowFailException that fails the task without retries."""
    from airflow_kafka_offsets.operators.base import AirflowFailException

    caught = Refusal()
    with pytest.raises((exc_type, AirflowFailException)) as info:
        yield caught
    error = info.value
    if isinstance(error, AirflowFailException):
        assert isinstance(error.__cause__, exc_type), f"{error!r} is not caused by a {exc_type.__name__}"
        assert f"{type(error.__cause__).__name__}: " in str(error)
        error = error.__cause__
    if match is not None:
        assert re.search(match, str(error)), f"{str(error)!r} does not match {match!r}"
    caught.value = error


def dag_bag() -> Any:
    """The DAGs folder parsed by Airflow's DagBag."""
    from ..dagbag import DagBag

    return DagBag()


def run_dag(dag_id: str) -> Any:
    """One real DAG run with ``dag.test()`` (the DAG from the DAGs folder, which must parse cleanly);
    dag.test() does not raise when a task fails, so the run's state is asserted here."""
    bag = dag_bag()
    assert not bag.import_errors, bag.import_errors
    dag_run = bag.get_dag(dag_id).test()
    assert dag_run.state == "success", f"DAG run ended {dag_run.state}"
    return dag_run


def new_ledger(stack: devstack.StackInfo, schema: str) -> Ledger:
    """A migrated ledger in ``schema`` of the stack's PostgreSQL."""
    ledger = Ledger(lambda: psycopg2.connect(stack.pg_dsn()), schema=schema, catalog_uri=stack.pg_url())
    ledger.migrate()
    return ledger


def topic_maker(kafka_admin: AdminClient) -> Callable[..., str]:
    """``create(partitions, config, prefix)``: a new topic of a unique name."""

    def create(partitions: int = 3, config: dict[str, str] | None = None, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        futures = kafka_admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
        )
        futures[name].result(timeout=30)
        return name

    return create
