"""Values that cross module boundaries: pipeline specs, offsets, plans and reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_kafka_offsets.core.merge import MergeSpec
from airflow_kafka_offsets.core.routing import TableRoutes


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
class AvroFormat:
    """Avro values in the Confluent wire format, decoded with a reader schema from a schema registry.

    ``version`` None: the subject's latest version when each batch is planned; a number pins it.
    """

    registry_conn_id: str
    subject: str
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        """As the pipeline's spec stores it (the ``value_format`` option users give)."""
        return {
            "type": "avro",
            "registry_conn_id": self.registry_conn_id,
            "subject": self.subject,
            "version": "latest" if self.version is None else self.version,
        }


@dataclass(frozen=True)
class AvroReader:
    """The reader schema a batch is decoded with: resolved from the registry when the batch is planned,
    recorded with the batch, and used by every read of it (a replay too)."""

    subject: str
    version: int
    schema_id: int
    schema: str  # the Avro schema (JSON) as the registry holds it

    def describe(self) -> str:
        return f"subject {self.subject!r} version {self.version} (schema id {self.schema_id})"

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "version": self.version, "schema_id": self.schema_id, "schema": self.schema}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AvroReader:
        return cls(str(data["subject"]), int(data["version"]), int(data["schema_id"]), str(data["schema"]))


@dataclass(frozen=True)
class DecodeSpec:
    """Optional decoding of record values (JSON, or Avro through a schema registry). The raw value is
    kept beside the decoded one, or (``keep_raw_value`` False) only for records that do not decode.

    ``schema`` is the Spark DDL of the ``decoded`` column: the user's ``json_schema``, or for Avro the
    one derived from the reader schema when a batch is planned ("" in the pipeline's spec, where only
    ``avro`` says where the reader schema comes from; ``reader`` is set on a batch's decoding).
    """

    schema: str  # Spark DDL, e.g. "id STRING, amount DOUBLE"
    max_errors: int | None = None  # fail the batch when more records than this cannot be decoded
    avro: AvroFormat | None = None
    reader: AvroReader | None = None
    keep_raw_value: bool = True  # False: ``value`` is null for the records that decoded

    @property
    def format(self) -> str:
        return "avro" if self.avro is not None else "json"

    @property
    def format_name(self) -> str:
        """How messages name the format."""
        return "Avro" if self.avro is not None else "JSON"

    def to_json(self) -> dict[str, Any]:
        """As the pipeline's spec stores it: what users chose, not what a batch resolved."""
        # keep_raw_value only when it is not the default: specs and batches stored before it stay equal
        raw = {} if self.keep_raw_value else {"keep_raw_value": False}
        if self.avro is not None:
            return {"format": "avro", **self.avro.to_json(), "max_errors": self.max_errors, **raw}
        return {"format": "json", "schema": self.schema, "max_errors": self.max_errors, **raw}

    def batch_json(self) -> dict[str, Any]:
        """As a batch records it and its Spark job gets it: with Avro, the resolved DDL and reader schema."""
        data = self.to_json()
        if self.avro is not None:
            data["schema"] = self.schema
            data["reader"] = self.reader.to_json() if self.reader else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DecodeSpec:
        """From :meth:`to_json` or :meth:`batch_json`."""
        avro = None
        if data.get("format") == "avro":
            version = data.get("version")
            avro = AvroFormat(
                str(data["registry_conn_id"]),
                str(data["subject"]),
                None if version in (None, "latest") else int(version),
            )
        reader = AvroReader.from_json(data["reader"]) if data.get("reader") else None
        keep_raw_value = data.get("keep_raw_value", True) is not False
        return cls(str(data.get("schema") or ""), data.get("max_errors"), avro, reader, keep_raw_value)


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
    ``catalog_conn_id``: an Iceberg catalog other than the ledger's (an Airflow connection: an Iceberg
    REST catalog, or a SQL catalog in another PostgreSQL database); commits are then idempotent
    rather than transactional, and many tables are committed one after another.
    ``routes``: many tables instead of ``table``, each record routed by its topic or a header.
    ``merge``: the table mirrors a source table from change events (merge mode, ``core/merge.py``).
    """

    format: SinkFormat = SinkFormat.DIRECTORY
    table: str | None = None
    partition_by: str | None = None
    catalog_conn_id: str | None = None
    routes: TableRoutes | None = None
    merge: MergeSpec | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"format": self.format.value, "table": self.table, "partition_by": self.partition_by}
        data |= self.routes.to_json() if self.routes else {}
        data |= self.merge.to_json() if self.merge else {}
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
            TableRoutes.from_json(data) if data.get("tables") or data.get("route") else None,
            MergeSpec.from_json(data),
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
            decode=DecodeSpec.from_json(data["decode"]) if data.get("decode") else None,
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


def batch_directory(batch_id: int) -> str:
    """A batch's directory name under its pipeline (``batch=000000000042``): zero-padded, so listings sort
    in batch order; also the partition key of the batch's asset event."""
    return f"batch={batch_id:012d}"


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
