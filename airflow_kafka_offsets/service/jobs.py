"""What a Spark attempt is given (the job file) and what of its report refuses a commit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kafka_offsets.core.merge import ChangeFormat
from airflow_kafka_offsets.core.model import BatchPlan, BatchReport, DecodeSpec, SinkSpec
from airflow_kafka_offsets.core.routing import TableRoutes
from airflow_kafka_offsets.errors import DecodeErrorThresholdError, UnroutableRecordsError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import ERRORS_DIR, JOB_FORMAT, debezium_envelope_ddl


def build_job(
    plan: BatchPlan,
    attempt_id: str,
    staging_uri: str,
    kafka_properties: Mapping[str, str],
    min_partitions: int | None = None,
    decode: DecodeSpec | None = None,
    sink: SinkSpec | None = None,
    rewrite: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The job file handed to the Spark app (see spark_apps/kafka_batch_contract.py for the format); ``rewrite``:
    a mirror's data files for Spark to rewrite (its ``merge.rewrite``)."""
    sink = sink or SinkSpec()
    decode_json = decode.batch_json() if decode else None
    debezium = sink.merge is not None and sink.merge.changes is ChangeFormat.DEBEZIUM
    if decode_json is not None and decode is not None and debezium and decode.avro is None:
        decode_json["schema"] = debezium_envelope_ddl(decode_json["schema"])  # the row, in its envelope
    # (Avro: the reader schema is Debezium's envelope already)
    return {
        "format": JOB_FORMAT,
        "pipeline": plan.pipeline,
        "batch_id": plan.batch_id,
        "attempt_id": attempt_id,
        "staging_uri": staging_uri,
        "min_partitions": min_partitions,
        "ranges": [r.to_json() for r in plan.readable_ranges],
        "kafka": dict(kafka_properties),
        "decode": decode_json,
        "partition_by": sink.partition_by,
        "routing": sink.routes.job_json() if sink.routes else None,
        **({"merge": {**sink.merge.job_json(), **({"rewrite": rewrite} if rewrite else {})}} if sink.merge else {}),
    }


def check_decode_errors(plan: BatchPlan, report: BatchReport, decode: DecodeSpec | None) -> None:
    errors = sum(p.decode_errors for p in report.partitions)
    if decode is None or decode.max_errors is None or errors <= decode.max_errors:
        return
    where = ", ".join(f"{p.topic_partition}: {p.decode_errors}" for p in report.partitions if p.decode_errors)
    raise DecodeErrorThresholdError(
        f"batch {plan.batch_id} of {plan.pipeline!r}: {errors} records could not be decoded as {decode.format_name} "
        f"({where}), "
        f"more than max_decode_errors={decode.max_errors}; nothing was committed. The records and their offsets "
        "are in the attempt's _errors/ output; fix the producer, raise the limit, or abort the batch"
    )


def check_routing(plan: BatchPlan, report: BatchReport, routes: TableRoutes | None) -> None:
    """A header route with ``unknown: refuse`` fails a batch holding records without a route."""
    routing = report.raw.get("routing") or {}
    unrouted = int(routing.get("unrouted") or 0)
    if routes is None or routes.header is None or routes.header.unknown != "refuse" or not unrouted:
        return
    values = ", ".join("(no header)" if v is None else repr(v) for v in routing.get("unrouted_values") or [])
    raise UnroutableRecordsError(
        f"batch {plan.batch_id} of {plan.pipeline!r}: {unrouted} records have no table (header "
        f"{routes.header.header!r} values: {values}; allowed: {', '.join(routes.header.allow)}) and the route "
        f"refuses unknown values; nothing was committed. The records and their offsets are in the attempt's "
        f"{ERRORS_DIR}/ output; allow their tables with change-spec, or abort the batch"
    )
