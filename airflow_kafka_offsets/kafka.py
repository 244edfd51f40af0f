"""Partitions and offsets from Kafka, through confluent-kafka's AdminClient."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import uuid
from datetime import datetime, timezone

from confluent_kafka import ConsumerGroupTopicPartitions, Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from airflow_kafka_offsets.errors import KafkaUnavailableError, UnknownTopicError
from airflow_kafka_offsets.model import PartitionOffsets, TopicPartition

ADMIN_ONLY_DROPPED = frozenset({"group.id", "enable.auto.commit", "auto.offset.reset", "isolation.level"})


class KafkaOffsetsClient:
    """Reads topic layout and offset bounds; never consumes records."""

    def __init__(self, config: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        if not config.get("bootstrap.servers"):
            raise KafkaUnavailableError("Kafka client config has no 'bootstrap.servers'")
        self._timeout_s = timeout_s
        self._bootstrap = config["bootstrap.servers"]
        admin_config = {k: v for k, v in config.items() if k not in ADMIN_ONLY_DROPPED}
        self._admin = AdminClient(admin_config)
        self._config = admin_config

    def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"Kafka at {self._bootstrap} did not answer within {self._timeout_s:.0f}s: {exc.args[0]}"
            ) from exc
        missing = [t for t in topics if t not in metadata.topics]
        if missing:
            raise UnknownTopicError(f"topic(s) {', '.join(sorted(missing))} not found in Kafka at {self._bootstrap}")
        result: list[TopicPartition] = []
        for topic in topics:
            meta = metadata.topics[topic]
            if meta.error is not None and meta.error.code() != KafkaError.NO_ERROR:
                if meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise UnknownTopicError(f"topic {topic!r} not found in Kafka at {self._bootstrap}")
                raise KafkaUnavailableError(f"metadata for topic {topic!r} failed: {meta.error.str()}")
            result.extend(TopicPartition(topic, p) for p in meta.partitions)
        return sorted(result)

    def _list_offsets(self, tps: Sequence[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in tps}
        futures = self._admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self._timeout_s
        )
        offsets: dict[TopicPartition, int] = {}
        for ktp, future in futures.items():
            try:
                offsets[TopicPartition(ktp.topic, ktp.partition)] = int(future.result(timeout=self._timeout_s).offset)
            except KafkaException as exc:
                raise KafkaUnavailableError(
                    f"listing offsets of {ktp.topic}-{ktp.partition} at {self._bootstrap} failed: {exc.args[0]}"
                ) from exc
        return offsets

    def offsets(self, topics: Sequence[str]) -> dict[TopicPartition, PartitionOffsets]:
        """Log start offset and last stable offset (read_committed end) of every partition."""
        tps = self.partitions(topics)
        if not tps:
            return {}
        earliest = self._list_offsets(tps, OffsetSpec.earliest())
        latest = self._list_offsets(tps, OffsetSpec.latest())
        return {tp: PartitionOffsets(earliest=earliest[tp], latest=latest[tp]) for tp in tps}

    def _consumer(self) -> Consumer:
        """A throw-away consumer that never joins or commits to a group."""
        return Consumer({**self._config, "group.id": f"airflow-kafka-offsets-probe-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})

    def offsets_for_time(self, tps: Sequence[TopicPartition], when: datetime) -> dict[TopicPartition, int | None]:
        """First offset at or after ``when`` per partition; None where no record is that recent."""
        millis = int(when.timestamp() * 1000)
        consumer = self._consumer()
        try:
            found = consumer.offsets_for_times(
                [KafkaTopicPartition(tp.topic, tp.partition, millis) for tp in tps], timeout=self._timeout_s
            )
        except KafkaException as exc:
            raise KafkaUnavailableError(f"offsets_for_times at {self._bootstrap} failed: {exc.args[0]}") from exc
        finally:
            consumer.close()
        return {TopicPartition(k.topic, k.partition): (k.offset if k.offset >= 0 else None) for k in found}

    def timestamps_at(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, datetime | None]:
        """Timestamp of the first record at or after each offset (for lag in time); None if none arrives."""
        if not positions:
            return {}
        consumer = self._consumer()
        result: dict[TopicPartition, datetime | None] = {tp: None for tp in positions}
        try:
            consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in positions.items()])
            pending = set(positions)
            deadline = datetime.now(timezone.utc).timestamp() + self._timeout_s
            while pending and datetime.now(timezone.utc).timestamp() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                tp = TopicPartition(msg.topic(), msg.partition())
                if tp in pending:
                    _, millis = msg.timestamp()
                    result[tp] = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
                    pending.discard(tp)
                    consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])
        finally:
            consumer.close()
        return result

    def mirror_consumer_group(self, group: str, cursors: Mapping[TopicPartition, int]) -> None:
        """Write the ledger's cursors into a consumer group so standard lag monitors see the pipeline."""
        request = ConsumerGroupTopicPartitions(
            group, [KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in sorted(cursors.items())]
        )
        future = self._admin.alter_consumer_group_offsets([request], request_timeout=self._timeout_s)[group]
        try:
            future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"mirroring offsets into consumer group {group!r} failed: {exc.args[0]}") from exc
