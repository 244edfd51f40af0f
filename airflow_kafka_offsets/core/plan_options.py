"""The pipeline options, declared once: the plan operator's and the one-task operator's keyword
arguments, the task group's ``plan_kwargs``, the change-spec form and flags, and the docs' table.

All but ``kafka_timeout_s`` are part of the pipeline's spec (:func:`~airflow_kafka_offsets.core.spec.build_spec`
validates them), stored when the pipeline first plans.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from airflow_kafka_offsets.core.defaults import KAFKA_TIMEOUT_S
from airflow_kafka_offsets.core.model import DataLossPolicy, StartPolicy
from airflow_kafka_offsets.core.options import option

_STARTS = tuple(str(p.value) for p in StartPolicy)
_ON_LOSS = tuple(str(p.value) for p in DataLossPolicy)
_CAP_HELP = "A positive number, or 'none' for no cap (empty: keep)."


@dataclass(frozen=True)
class PlanOptions:
    """How a pipeline plans its batches: where it starts, its caps, its decode step (values as users
    give them, often rendered templates: :func:`~airflow_kafka_offsets.core.spec.build_spec` checks them)."""

    starting_offsets: str = option(
        StartPolicy.EARLIEST.value,
        "where a new pipeline starts: `earliest`, `latest` or `error`",
        choices=_STARTS,
    )
    new_partition_offsets: str = option(
        StartPolicy.EARLIEST.value,
        "where partitions added later start (same choices)",
        choices=_STARTS,
        cli="--new-partition-offsets",
        form=("where new partitions start", "earliest, latest or error (empty: keep)."),
    )
    on_data_loss: str = option(
        DataLossPolicy.FAIL.value,
        "`fail` when retention deleted records the pipeline has not read, with the lost span in the message; "
        "`skip` records the lost span in the ledger and continues",
        choices=_ON_LOSS,
        cli="--on-data-loss",
        form=("on data loss", "fail, or skip and record the lost span (empty: keep)."),
    )
    max_records_per_batch: int | str | None = option(
        None,
        "a cap shared max-min fairly across partitions",
        cli="--max-records-per-batch",
        form=("max records per batch", _CAP_HELP),
    )
    max_records_per_partition: int | str | None = option(
        None,
        "a cap per partition",
        cli="--max-records-per-partition",
        form=("max records per partition", _CAP_HELP),
    )
    consumer_group: str | None = option(
        None,
        "also write the cursor into this Kafka consumer group at every commit and reset, so "
        "`kafka-consumer-groups --describe` and other lag monitors show the pipeline's lag (the ledger never "
        "reads it back)",
    )
    json_schema: str | None = option(
        None, "a Spark DDL schema: the optional JSON decode step, [below](#decoding-json-optional)"
    )
    max_decode_errors: int | str | None = option(
        None, "fail the batch when more records than this cannot be decoded (with `json_schema` or `value_format`)"
    )
    value_format: Mapping[str, Any] | str | None = option(
        None,
        "Avro values through a schema registry instead of JSON, "
        "[below](#decoding-avro-through-a-schema-registry-optional)",
    )
    keep_raw_value: bool | str | None = option(
        None,
        "with a decode step, `false` writes `value` only for the records that do not decode, "
        "[below](#keeping-the-raw-value)",
        default_doc="`true`",
    )
    kafka_timeout_s: float = option(
        KAFKA_TIMEOUT_S, "how long planning waits for Kafka's answers (seconds)", templated=False
    )

    def spec_kwargs(self) -> dict[str, Any]:
        """The options that are part of the pipeline's spec, as ``build_spec`` keyword arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NOT_IN_SPEC}


# The options that shape how a run plans, not what the pipeline is.
NOT_IN_SPEC = frozenset({"kafka_timeout_s"})
