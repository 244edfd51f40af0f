"""Values that cross module boundaries: pipeline specs, offsets, plans and reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class StartPolicy(str, Enum):
    """Where a partition without a cursor starts (like Kafka's ``auto.offset.reset``)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    ERROR = "error"


class DataLossPolicy(str, Enum):
    """What to do when retention deleted records the pipeline has not read yet."""

    FAIL = "fail"
    SKIP = "skip"


class BatchState(str, Enum):
    PLANNED = "planned"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class PartitionOffsets:
    """Kafka's view of one partition: log start offset and last stable offset (exclusive end)."""

    earliest: int
    latest: int


@dataclass(frozen=True)
class DecodeSpec:
    """Optional JSON decoding of record values; raw bytes are always kept alongside."""

    schema: str  # Spark DDL, e.g. "id STRING, amount DOUBLE"
    max_errors: int | None = None  # fail the batch when more records than this cannot be decoded

    def to_json(self) -> dict[str, Any]:
        return {"format": "json", "schema": self.schema, "max_errors": self.max_errors}


class SinkFormat(str, Enum):
    """Where committed batches land: Parquet directories, or a table format any engine reads."""

    DIRECTORY = "directory"
    ICEBERG = "iceberg"
    DELTA = "delta"


@dataclass(frozen=True)
class SinkSpec:
    """The pipeline's output format; ``table`` names the table of the table formats.

    Iceberg: ``namespace.table`` in the SQL catalog kept in the ledger's database, with its
    data under ``output_root`` (the warehouse). Delta: the table lives at ``<output_root>/<table>``.
    ``partition_by="day"`` partitions a table by the UTC day of the record timestamp.
    ``catalog_conn_id``: an Iceberg SQL catalog in another PostgreSQL database (an Airflow
    connection) instead of the ledger's; commits are then idempotent rather than transactional.
    """

    format: SinkFormat = SinkFormat.DIRECTORY
    table: str | None = None
    partition_by: str | None = None
    catalog_conn_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"format": self.format.value, "table": self.table, "partition_by": self.partition_by}
        return data | ({"catalog_conn_id": self.catalog_conn_id} if self.catalog_conn_id else {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SinkSpec:
        if not data:
            return cls()
        return cls(
            SinkFormat(data.get("format", "directory")),
            data.get("table"),
            data.get("partition_by"),
            data.get("catalog_conn_id"),
        )


@dataclass(frozen=True)
class PipelineSpec:
    """What a pipeline ingests and how it behaves at the edges of the log."""

    name: str
    topics: tuple[str, ...]
    output_root: str
    starting_offsets: StartPolicy = StartPolicy.EARLIEST
    new_partition_offsets: StartPolicy = StartPolicy.EARLIEST
    on_data_loss: DataLossPolicy = DataLossPolicy.FAIL
    max_records_per_batch: int | None = None
    max_records_per_partition: int | None = None
    consumer_group: str | None = None
    decode: DecodeSpec | None = None
    sink: SinkSpec = field(default_factory=SinkSpec)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topics": list(self.topics),
            "output_root": self.output_root,
            "sink": self.sink.to_json(),
            "starting_offsets": self.starting_offsets.value,
            "new_partition_offsets": self.new_partition_offsets.value,
            "on_data_loss": self.on_data_loss.value,
            "max_records_per_batch": self.max_records_per_batch,
            "max_records_per_partition": self.max_records_per_partition,
            "consumer_group": self.consumer_group,
            "decode": self.decode.to_json() if self.decode else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PipelineSpec:
        return cls(
            name=data["name"],
            topics=tuple(data["topics"]),
            output_root=data["output_root"],
            sink=SinkSpec.from_json(data.get("sink")),
            starting_offsets=StartPolicy(data.get("starting_offsets", "earliest")),
            new_partition_offsets=StartPolicy(data.get("new_partition_offsets", "earliest")),
            on_data_loss=DataLossPolicy(data.get("on_data_loss", "fail")),
            max_records_per_batch=data.get("max_records_per_batch"),
            max_records_per_partition=data.get("max_records_per_partition"),
            consumer_group=data.get("consumer_group"),
            decode=DecodeSpec(data["decode"]["schema"], data["decode"].get("max_errors"))
            if data.get("decode")
            else None,
        )


@dataclass(frozen=True, order=True)
class PartitionRange:
    """The offsets ``[start, end)`` of one partition in a batch.

    ``cursor`` is the committed cursor the batch expects to find (compare-and-set);
    it equals ``start`` except when retention deleted ``[cursor, start)`` and the
    pipeline allows skipping it, so the ledger still accounts for every offset.
    """

    topic: str
    partition: int
    start: int
    end: int
    cursor: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def span(self) -> int:
        return self.end - self.start

    @property
    def lost(self) -> int:
        return self.start - self.cursor

    def to_json(self) -> dict[str, Any]:
        """The range as readers see it (table commit properties, asset events, lineage)."""
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class BatchPlan:
    """A batch as written to the ledger before Spark runs; it never changes afterwards."""

    pipeline: str
    batch_id: int
    epoch: int
    ranges: tuple[PartitionRange, ...]
    output_uri: str

    @property
    def records_planned(self) -> int:
        return sum(r.span for r in self.ranges)

    @property
    def readable_ranges(self) -> tuple[PartitionRange, ...]:
        return tuple(r for r in self.ranges if r.span > 0)


@dataclass(frozen=True)
class PartitionReport:
    """What the Spark job wrote for one partition."""

    topic: str
    partition: int
    records: int
    min_offset: int | None
    max_offset: int | None
    distinct_offsets: int
    payload_bytes: int
    decode_errors: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class BatchReport:
    """The Spark job's account of a batch, checked against the plan before commit."""

    pipeline: str
    batch_id: int
    partitions: tuple[PartitionReport, ...]
    output_bytes: int
    spark_version: str
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The document as the Spark app wrote it: what the ledger stores, unchanged."""

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)
