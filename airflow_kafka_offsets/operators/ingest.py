"""Thin operators over :mod:`airflow_kafka_offsets.service.batches`.

Use them separately (the batch id travels by XCom) or through
:func:`kafka_ingest_task_group`. A retried or re-run task replays the planned
batch; a batch committed by another run is reported, not written again.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, TaskGroup, conf

from airflow_kafka_offsets.service.batches import commit_batch, load_batch, plan_batch, run_batch
from airflow_kafka_offsets.service.lease import DEFAULT_LEASE_S, DEFAULT_WAIT_S
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.hooks import KafkaClusterHook, LedgerHook
from airflow_kafka_offsets.core.spec import build_spec, validate_pipeline_name
from airflow_kafka_offsets.sinks import LocalDirectorySink
from airflow_kafka_offsets.clients.spark_submit import SparkBatchSubmitter, SparkSettings, split_list

CONFIG_SECTION = "kafka_offsets"


def _config(key: str, fallback: str) -> str:
    return conf.get(CONFIG_SECTION, key, fallback=fallback) or fallback


def actor_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """Which Airflow run and try did this, for the ledger's audit trail."""
    ti = context.get("ti")
    return {
        "dag_id": getattr(ti, "dag_id", None),
        "run_id": getattr(ti, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "try_number": getattr(ti, "try_number", None),
        "map_index": getattr(ti, "map_index", None),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
    }


def parse_batch_id(value: Any) -> int | None:
    """Batch ids arrive as ints, or as rendered template strings ('None' when nothing was planned)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    try:
        batch_id = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"batch_id must be an integer, got {value!r}") from None
    if batch_id < 1:
        raise ConfigurationError(f"batch_id must be positive, got {batch_id}")
    return batch_id


class _LedgerOperator(BaseOperator):
    """Shared connection parameters of the three operators."""

    def __init__(
        self,
        *,
        pipeline: str,
        postgres_conn_id: str = "postgres_default",
        ledger_schema: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.postgres_conn_id = postgres_conn_id
        self.ledger_schema = ledger_schema

    def ledger(self):
        return LedgerHook(self.postgres_conn_id, self.ledger_schema or _config("ledger_schema", "kafka_offsets")).get_conn()

    def sink_for(self, ledger) -> LocalDirectorySink:
        with ledger.transaction() as tx:
            return LocalDirectorySink(tx.output_root(self.pipeline))


class KafkaBatchPlanOperator(_LedgerOperator):
    """Write the next batch's exact offset ranges to the ledger, or return the batch already planned.

    Returns ``{"pipeline", "batch_id", "records_planned", "replayed"}``; ``batch_id``
    is None when Kafka holds nothing new.
    """

    template_fields: Sequence[str] = (
        "pipeline",
        "topics",
        "output_root",
        "starting_offsets",
        "new_partition_offsets",
        "on_data_loss",
        "max_records_per_batch",
        "max_records_per_partition",
        "consumer_group",
        "json_schema",
        "max_decode_errors",
        "ledger_schema",
    )
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        topics: Sequence[str] | str,
        output_root: str,
        kafka_conn_id: str = "kafka_default",
        starting_offsets: str = "earliest",
        new_partition_offsets: str = "earliest",
        on_data_loss: str = "fail",
        max_records_per_batch: int | str | None = None,
        max_records_per_partition: int | str | None = None,
        consumer_group: str | None = None,
        json_schema: str | None = None,
        max_decode_errors: int | str | None = None,
        kafka_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.consumer_group = consumer_group
        self.json_schema = json_schema
        self.max_decode_errors = max_decode_errors
        self.topics = topics
        self.output_root = output_root
        self.kafka_conn_id = kafka_conn_id
        self.starting_offsets = starting_offsets
        self.new_partition_offsets = new_partition_offsets
        self.on_data_loss = on_data_loss
        self.max_records_per_batch = max_records_per_batch
        self.max_records_per_partition = max_records_per_partition
        self.kafka_timeout_s = kafka_timeout_s

    def execute(self, context: Any) -> dict[str, Any]:
        spec = build_spec(
            self.pipeline,
            self.topics,
            self.output_root,
            starting_offsets=self.starting_offsets,
            new_partition_offsets=self.new_partition_offsets,
            on_data_loss=self.on_data_loss,
            max_records_per_batch=self.max_records_per_batch,
            max_records_per_partition=self.max_records_per_partition,
            consumer_group=self.consumer_group,
            json_schema=self.json_schema,
            max_decode_errors=self.max_decode_errors,
        )
        sink = LocalDirectorySink(spec.output_root)
        sink.check_writable()
        kafka = KafkaClusterHook(self.kafka_conn_id, timeout_s=self.kafka_timeout_s).get_conn()
        outcome = plan_batch(self.ledger(), spec, kafka.offsets, sink, actor_from_context(context))
        plan = outcome.plan
        return {
            "pipeline": spec.name,
            "batch_id": plan.batch_id if plan else None,
            "records_planned": plan.records_planned if plan else 0,
            "replayed": outcome.replayed,
        }


class KafkaBatchSparkOperator(_LedgerOperator):
    """Read the batch's ranges with Spark into a staging location and check Spark's report.

    ``batch_id`` defaults to the pipeline's planned batch. Nothing runs when
    there is no batch, the batch is already committed, or it reads no records;
    no second Spark job runs when another run's attempt has read the batch or
    is reading it (this one waits, ``[kafka_offsets] attempt_wait_seconds``).
    """

    template_fields: Sequence[str] = (
        "pipeline",
        "batch_id",
        "ledger_schema",
        "spark_conf",
        "spark_jars",
        "spark_packages",
        "min_partitions",
    )
    template_fields_renderers = {"spark_conf": "json"}
    ui_color = "#fdf0e0"

    def __init__(
        self,
        *,
        batch_id: int | str | None = None,
        kafka_conn_id: str = "kafka_default",
        spark_conn_id: str = "spark_default",
        spark_conf: Mapping[str, str] | None = None,
        spark_jars: str | Sequence[str] | None = None,
        spark_packages: str | Sequence[str] | None = None,
        min_partitions: int | str | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        driver_memory: str | None = None,
        num_executors: int | None = None,
        total_executor_cores: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.batch_id = batch_id
        self.kafka_conn_id = kafka_conn_id
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.min_partitions = min_partitions
        self.executor_cores = executor_cores
        self.executor_memory = executor_memory
        self.driver_memory = driver_memory
        self.num_executors = num_executors
        self.total_executor_cores = total_executor_cores

    def settings(self) -> SparkSettings:
        return SparkSettings(
            conn_id=self.spark_conn_id,
            jars=split_list(self.spark_jars) or split_list(_config("spark_jars", "")),
            packages=split_list(self.spark_packages) or split_list(_config("spark_packages", "")),
            conf=dict(self.spark_conf or {}),
            executor_cores=self.executor_cores,
            executor_memory=self.executor_memory,
            driver_memory=self.driver_memory,
            num_executors=self.num_executors,
            total_executor_cores=self.total_executor_cores,
        )

    def execute(self, context: Any) -> dict[str, Any] | None:
        validate_pipeline_name(self.pipeline)
        ledger = self.ledger()
        plan = load_batch(ledger, self.pipeline, parse_batch_id(self.batch_id))
        if plan is None:
            self.log.info("pipeline %s: no batch to read", self.pipeline)
            return None
        submitter = SparkBatchSubmitter(self.settings())
        if plan.readable_ranges:
            submitter.check()  # a missing Spark connection fails here, before the ledger records an attempt
        report = run_batch(
            ledger,
            self.sink_for(ledger),
            plan,
            submitter,
            KafkaClusterHook(self.kafka_conn_id).spark_properties() if plan.readable_ranges else {},
            actor_from_context(context),
            min_partitions=int(self.min_partitions) if self.min_partitions not in (None, "", "None") else None,
            lease_s=float(_config("attempt_lease_seconds", str(DEFAULT_LEASE_S))),
            wait_s=float(_config("attempt_wait_seconds", str(DEFAULT_WAIT_S))),
        )
        records = report.records if report else 0
        return {"pipeline": plan.pipeline, "batch_id": plan.batch_id, "records_read": records}


class KafkaBatchCommitOperator(_LedgerOperator):
    """Publish the batch's staged output and advance the cursor in one ledger transaction."""

    template_fields: Sequence[str] = ("pipeline", "batch_id", "ledger_schema")
    ui_color = "#e0ecfd"

    def __init__(self, *, batch_id: int | str | None = None, kafka_conn_id: str = "kafka_default",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch_id = batch_id
        self.kafka_conn_id = kafka_conn_id

    def execute(self, context: Any) -> dict[str, Any] | None:
        validate_pipeline_name(self.pipeline)
        ledger = self.ledger()
        batch_id = parse_batch_id(self.batch_id)
        if batch_id is None:
            with ledger.transaction() as tx:
                batch_id = tx.planned_batch_id(self.pipeline)
            if batch_id is None:
                self.log.info("pipeline %s: no batch to commit", self.pipeline)
                return None
        outcome = commit_batch(ledger, self.sink_for(ledger), self.pipeline, batch_id, actor_from_context(context))
        if outcome.committed_now:
            self.mirror_consumer_group(ledger)
        return {
            "pipeline": self.pipeline,
            "batch_id": batch_id,
            "records": outcome.records,
            "committed_now": outcome.committed_now,
            "output_uri": outcome.plan.output_uri,
        }


    def mirror_consumer_group(self, ledger) -> None:
        """Best effort: the ledger is the truth, the consumer group only feeds lag monitors."""
        from airflow_kafka_offsets.service.operations import mirror_to_consumer_group

        try:
            group = mirror_to_consumer_group(ledger, KafkaClusterHook(self.kafka_conn_id).get_conn(), self.pipeline)
        except Exception as exc:
            self.log.warning("pipeline %s: could not mirror offsets into its consumer group: %s", self.pipeline, exc)
        else:
            if group:
                self.log.info("pipeline %s: offsets mirrored into consumer group %s", self.pipeline, group)


def kafka_ingest_task_group(
    group_id: str,
    *,
    pipeline: str,
    topics: Sequence[str] | str,
    output_root: str,
    kafka_conn_id: str = "kafka_default",
    postgres_conn_id: str = "postgres_default",
    spark_conn_id: str = "spark_default",
    ledger_schema: str | None = None,
    plan_kwargs: Mapping[str, Any] | None = None,
    spark_kwargs: Mapping[str, Any] | None = None,
    commit_kwargs: Mapping[str, Any] | None = None,
) -> TaskGroup:
    """plan >> read >> commit for one pipeline, the batch id passed by XCom."""
    common = {"pipeline": pipeline, "postgres_conn_id": postgres_conn_id, "ledger_schema": ledger_schema}
    with TaskGroup(group_id=group_id) as group:
        plan = KafkaBatchPlanOperator(
            task_id="plan",
            topics=topics,
            output_root=output_root,
            kafka_conn_id=kafka_conn_id,
            **common,
            **(plan_kwargs or {}),
        )
        batch_id = "{{ ti.xcom_pull(task_ids='%s')['batch_id'] }}" % plan.task_id
        read = KafkaBatchSparkOperator(
            task_id="read",
            batch_id=batch_id,
            kafka_conn_id=kafka_conn_id,
            spark_conn_id=spark_conn_id,
            **common,
            **(spark_kwargs or {}),
        )
        commit = KafkaBatchCommitOperator(
            task_id="commit", batch_id=batch_id, kafka_conn_id=kafka_conn_id, **common, **(commit_kwargs or {})
        )
        plan >> read >> commit
    return group
