"""Pure planning: from cursors, Kafka's offsets and a pipeline spec to the next batch's ranges.

No I/O here, so every rule can be tested by the hundred. The ledger and the
Kafka client feed this module; nothing in it talks to either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from airflow_kafka_offsets.errors import (
    DataLossError,
    InvalidPipelineSpecError,
    NoStartingOffsetError,
    OffsetOutOfRangeError,
    PartitionVanishedError,
    ReportMismatchError,
    UnknownTopicError,
)
from airflow_kafka_offsets.model import (
    BatchPlan,
    BatchReport,
    DataLossPolicy,
    DecodeSpec,
    PartitionOffsets,
    PartitionRange,
    PipelineSpec,
    StartPolicy,
    TopicPartition,
)

PIPELINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Kafka's own rule for topic names.
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def validate_pipeline_name(name: str) -> str:
    """Pipeline names end up in paths and log lines: keep them to a safe alphabet."""
    if not isinstance(name, str) or not PIPELINE_NAME.fullmatch(name) or name in {".", ".."}:
        raise InvalidPipelineSpecError(
            f"invalid pipeline name {name!r}: use 1-128 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _positive_or_none(value: object, what: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)  # templated values arrive as strings
    except (TypeError, ValueError):
        raise InvalidPipelineSpecError(f"{what} must be a positive integer, got {value!r}") from None
    if number <= 0 or str(number) != str(value).strip():
        raise InvalidPipelineSpecError(f"{what} must be a positive integer, got {value!r}")
    return number


def _count_or_none(value: object, what: str) -> int | None:
    if value is None or value == "":
        return None
    if str(value).strip() == "0":
        return 0
    return _positive_or_none(value, what)


def _enum(enum_type: type, value: object, what: str):
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise InvalidPipelineSpecError(f"{what} must be one of {allowed}; got {value!r}") from None


def build_spec(
    name: str,
    topics: Sequence[str] | str,
    output_root: str,
    *,
    starting_offsets: str | StartPolicy = StartPolicy.EARLIEST,
    new_partition_offsets: str | StartPolicy = StartPolicy.EARLIEST,
    on_data_loss: str | DataLossPolicy = DataLossPolicy.FAIL,
    max_records_per_batch: int | str | None = None,
    max_records_per_partition: int | str | None = None,
    consumer_group: str | None = None,
    json_schema: str | None = None,
    max_decode_errors: int | str | None = None,
) -> PipelineSpec:
    """Validate user input (often rendered templates) into a :class:`PipelineSpec`."""
    validate_pipeline_name(name)
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    topic_list = list(topics)
    if not topic_list:
        raise InvalidPipelineSpecError(f"pipeline {name!r} names no topics")
    for topic in topic_list:
        if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic) or topic in {".", ".."}:
            raise InvalidPipelineSpecError(f"invalid Kafka topic name {topic!r} in pipeline {name!r}")
    if len(set(topic_list)) != len(topic_list):
        raise InvalidPipelineSpecError(f"pipeline {name!r} lists a topic twice: {topic_list}")
    decode = None
    if json_schema is not None and str(json_schema).strip():
        decode = DecodeSpec(str(json_schema).strip(), _count_or_none(max_decode_errors, "max_decode_errors"))
    elif max_decode_errors not in (None, ""):
        raise InvalidPipelineSpecError(f"pipeline {name!r}: max_decode_errors needs a json_schema to decode with")
    if not isinstance(output_root, str) or not output_root.strip():
        raise InvalidPipelineSpecError(f"pipeline {name!r} needs an output_root")
    return PipelineSpec(
        name=name,
        topics=tuple(sorted(topic_list)),
        output_root=output_root.strip(),
        starting_offsets=_enum(StartPolicy, starting_offsets, "starting_offsets"),
        new_partition_offsets=_enum(StartPolicy, new_partition_offsets, "new_partition_offsets"),
        on_data_loss=_enum(DataLossPolicy, on_data_loss, "on_data_loss"),
        max_records_per_batch=_positive_or_none(max_records_per_batch, "max_records_per_batch"),
        max_records_per_partition=_positive_or_none(max_records_per_partition, "max_records_per_partition"),
        consumer_group=(consumer_group or "").strip() or None,
        decode=decode,
    )


def fair_shares(needs: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` over ``needs`` max-min fairly (water-filling), deterministically.

    Small needs are met in full; what is left is shared equally by the rest, so
    one busy partition cannot starve the others under a total cap.
    """
    shares = [0] * len(needs)
    remaining = max(budget, 0)
    order = sorted(range(len(needs)), key=lambda i: (needs[i], i))
    for left, index in zip(range(len(order), 0, -1), order):
        share = min(needs[index], remaining // left)
        shares[index] = share
        remaining -= share
    return shares


def _start_offset(
    tp: TopicPartition,
    cursor: int | None,
    offsets: PartitionOffsets,
    policy: StartPolicy,
    pipeline: str,
) -> int:
    if cursor is not None:
        return cursor
    if policy is StartPolicy.EARLIEST:
        return offsets.earliest
    if policy is StartPolicy.LATEST:
        return offsets.latest
    raise NoStartingOffsetError(
        f"pipeline {pipeline!r} has no cursor for {tp} and its policy is 'error': "
        "reset the pipeline's offsets for this partition or choose 'earliest' or 'latest'"
    )


def plan_ranges(
    spec: PipelineSpec,
    cursors: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
) -> tuple[PartitionRange, ...]:
    """The ranges of the next batch, one per partition of the spec's topics (possibly empty).

    ``cursors`` are the committed next offsets; ``offsets`` Kafka's current log
    start and last stable offsets. Raises on data loss (unless skipping is
    allowed), on cursors beyond the log end, and on vanished topics or partitions.
    """
    topics = set(spec.topics)
    present = {tp.topic for tp in offsets}
    missing_topics = sorted(topics - present)
    if missing_topics:
        raise UnknownTopicError(f"pipeline {spec.name!r}: topic(s) {', '.join(missing_topics)} not found in Kafka")
    vanished = sorted(tp for tp in cursors if tp.topic in topics and tp not in offsets)
    if vanished:
        raise PartitionVanishedError(
            f"pipeline {spec.name!r}: partition(s) {', '.join(map(str, vanished))} have cursors but no longer "
            "exist in Kafka (topic recreated with fewer partitions?); reset the pipeline to continue"
        )

    first_batch = not any(tp.topic in topics for tp in cursors)
    policy = spec.starting_offsets if first_batch else spec.new_partition_offsets
    lost: list[str] = []
    beyond: list[str] = []
    starts: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (cursor, start)
    for tp in sorted(tp for tp in offsets if tp.topic in topics):
        kafka = offsets[tp]
        cursor = cursors.get(tp)
        start = _start_offset(tp, cursor, kafka, policy, spec.name)
        if start < kafka.earliest:
            lost.append(f"{tp} offsets [{start}, {kafka.earliest}) ({kafka.earliest - start} records)")
            if spec.on_data_loss is DataLossPolicy.SKIP:
                starts[tp] = (start, kafka.earliest)
                continue
        elif start > kafka.latest:
            beyond.append(f"{tp} cursor {start} > latest offset {kafka.latest}")
        starts[tp] = (start, start)

    if beyond:
        raise OffsetOutOfRangeError(
            f"pipeline {spec.name!r}: cursor beyond the end of the log for {'; '.join(beyond)}. "
            "The topic was probably deleted and recreated; reset the pipeline's offsets to continue"
        )
    if lost and spec.on_data_loss is DataLossPolicy.FAIL:
        raise DataLossError(
            f"pipeline {spec.name!r}: retention deleted records not yet ingested: {'; '.join(lost)}. "
            "Nothing was ingested. Set on_data_loss='skip' to record the gap and continue, or reset the offsets"
        )

    tps = sorted(starts)
    needs = [max(offsets[tp].latest - starts[tp][1], 0) for tp in tps]
    if spec.max_records_per_partition is not None:
        needs = [min(n, spec.max_records_per_partition) for n in needs]
    if spec.max_records_per_batch is not None:
        needs = fair_shares(needs, spec.max_records_per_batch)
    return tuple(
        PartitionRange(tp.topic, tp.partition, start=start, end=start + need, cursor=cursor)
        for tp, need in zip(tps, needs)
        for cursor, start in [starts[tp]]
    )


def has_work(ranges: Sequence[PartitionRange], cursors: Mapping[TopicPartition, int]) -> bool:
    """A batch is worth planning when it reads records, skips lost ones, or starts tracking a partition."""
    return any(r.span > 0 or r.lost > 0 or r.topic_partition not in cursors for r in ranges)


def check_report(plan: BatchPlan, report: BatchReport) -> None:
    """Refuse to commit output that does not fit the plan.

    Offsets may have gaps (transaction markers, aborted records, compaction), so
    a partition may hold fewer records than its span, never more, never an
    offset outside ``[start, end)`` and never the same offset twice.
    """
    problems: list[str] = []
    if (report.pipeline, report.batch_id) != (plan.pipeline, plan.batch_id):
        problems.append(
            f"report is for {report.pipeline!r} batch {report.batch_id}, "
            f"expected {plan.pipeline!r} batch {plan.batch_id}"
        )
    planned = {r.topic_partition: r for r in plan.ranges}
    for part in report.partitions:
        rng = planned.get(part.topic_partition)
        if rng is None:
            problems.append(f"{part.topic_partition}: {part.records} records from a partition not in the plan")
            continue
        if part.distinct_offsets != part.records:
            problems.append(
                f"{part.topic_partition}: {part.records} records but {part.distinct_offsets} distinct offsets"
            )
        if part.records > rng.span:
            problems.append(f"{part.topic_partition}: {part.records} records exceed the planned span {rng.span}")
        if part.records and (
            part.min_offset is None
            or part.max_offset is None
            or part.min_offset < rng.start
            or part.max_offset >= rng.end
        ):
            problems.append(
                f"{part.topic_partition}: offsets [{part.min_offset}, {part.max_offset}] outside "
                f"the planned range [{rng.start}, {rng.end})"
            )
    if problems:
        raise ReportMismatchError(
            f"batch {plan.batch_id} of pipeline {plan.pipeline!r} does not match its plan: " + "; ".join(problems)
        )
