"""Kafka in memory: topics of partitions of records, for tests of the batch steps without a broker.

:class:`MemoryKafka` is an :data:`~airflow_kafka_offsets.service.readable.OffsetsSource` (what the
planner asks: each partition's log start and end offset) and the record log an in-memory Spark job
reads (:class:`~airflow_kafka_offsets.sinks.memory.MemorySpark`). Offsets may have gaps, as a
transaction's commit marker leaves one, and retention may delete a log's head.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.errors import UnknownTopicError


class MemoryKafka:
    """Topics and their partitions' records: ``(offset, value)`` in offset order, from the log start offset."""

    def __init__(self) -> None:
        self._logs: dict[TopicPartition, list[tuple[int, bytes]]] = {}
        self._ends: dict[TopicPartition, int] = {}
        self._starts: dict[TopicPartition, int] = {}
        self._lock = threading.Lock()

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` or grow it to ``partitions`` partitions."""
        with self._lock:
            for p in range(partitions):
                tp = TopicPartition(topic, p)
                self._logs.setdefault(tp, [])
                self._ends.setdefault(tp, 0)
                self._starts.setdefault(tp, 0)

    def produce(self, topic: str, partition: int, *values: bytes) -> list[int]:
        """Append records; returns their offsets."""
        tp = self._known(topic, partition)
        with self._lock:
            offsets = list(range(self._ends[tp], self._ends[tp] + len(values)))
            self._logs[tp].extend(zip(offsets, values, strict=True))
            self._ends[tp] += len(values)
        return offsets

    def commit_marker(self, topic: str, partition: int) -> int:
        """Take one offset without a readable record (a transaction's commit marker); returns it."""
        tp = self._known(topic, partition)
        with self._lock:
            self._ends[tp] += 1
            return self._ends[tp] - 1

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Retention: the log now starts at ``before``."""
        tp = self._known(topic, partition)
        with self._lock:
            self._starts[tp] = max(self._starts[tp], min(before, self._ends[tp]))
            self._logs[tp] = [(o, v) for o, v in self._logs[tp] if o >= self._starts[tp]]

    def records(self, tp: TopicPartition, start: int, end: int) -> list[tuple[int, bytes]]:
        """The records of ``[start, end)`` still in the log."""
        with self._lock:
            return [(o, v) for o, v in self._logs.get(tp, []) if start <= o < end]

    def __call__(self, topics: Sequence[str]) -> Mapping[TopicPartition, PartitionOffsets]:
        """Each partition's log start and end offset, for the given topics."""
        with self._lock:
            missing = [t for t in topics if not any(tp.topic == t for tp in self._ends)]
            if missing:
                raise UnknownTopicError(f"topic(s) {', '.join(missing)} do not exist in Kafka")
            return {
                tp: PartitionOffsets(self._starts[tp], self._ends[tp])
                for tp in sorted(self._ends)
                if tp.topic in topics
            }

    def _known(self, topic: str, partition: int) -> TopicPartition:
        tp = TopicPartition(topic, partition)
        if tp not in self._ends:
            raise UnknownTopicError(f"{tp} does not exist in Kafka")
        return tp
