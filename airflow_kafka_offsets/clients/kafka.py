"""Partitions and offsets from Kafka, through confluent-kafka's AdminClient."""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from confluent_kafka.admin._listoffsets import OffsetSpec

from airflow_kafka_offsets.core.model import PartitionOffsets, TopicPartition
from airflow_kafka_offsets.core.retention import TopicRetention
from airflow_kafka_offsets.errors import KafkaAuthenticationError, KafkaUnavailableError, UnknownTopicError

ADMIN_ONLY_DROPPED = frozenset({"group.id", "enable.auto.commit", "auto.offset.reset", "isolation.level"})
# librdkafka reports these through error_cb only; list_topics just times out with _TRANSPORT.
AUTHENTICATION_ERRORS = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
# A TLS handshake the client refused because the broker's certificate did not verify (wrong or
# missing ssl.ca.location, a host name the certificate does not name): OpenSSL's reason, in an _SSL
# error. Other _SSL errors (a handshake cut short by a restarting broker) may pass with a retry.
CERTIFICATE_NOT_VERIFIED = "certificate verify failed"
METADATA_WINDOW_S = 0.5
METADATA_WINDOW_MAX_S = 8.0
# A partition whose leader is moving (right after the topic's creation, during a broker's restart) answers
# one of these; it is asked again after a pause (the broker's answer does not always carry librdkafka's
# retriable flag)
LEADER_MOVING = frozenset(
    {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}
)
LIST_OFFSETS_RETRY_S = 0.2


class _ErrorLog:
    """Collects the client's error callbacks (served by ``poll``), keeping the user's own error_cb."""

    def __init__(self, chained: Callable[[KafkaError], None] | None) -> None:
        self._chained = chained
        self._errors: deque[KafkaError] = deque(maxlen=20)
        self._lock = threading.Lock()

    def __call__(self, error: KafkaError) -> None:
        with self._lock:
            self._errors.append(error)
        if self._chained is not None:
            self._chained(error)

    def authentication_failure(self) -> KafkaError | None:
        """The latest refusal a retry cannot fix: credentials rejected, or the broker's certificate not verified."""
        with self._lock:
            return next((e for e in reversed(self._errors) if is_refusal(e)), None)

    def last(self) -> KafkaError | None:
        """The most telling recent error: a broker-level one over librdkafka's 'all brokers down' summary."""
        with self._lock:
            errors = list(self._errors)
        specific = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
        recent = specific or errors
        return recent[-1] if recent else None


def is_refusal(error: KafkaError) -> bool:
    """True for an error a retry cannot fix: SASL authentication failed, or TLS verification of the broker."""
    return error.code() in AUTHENTICATION_ERRORS or (
        error.code() == KafkaError._SSL and CERTIFICATE_NOT_VERIFIED in error.str()
    )


class KafkaOffsetsClient:
    """Reads topic layout and offset bounds; never consumes records."""

    def __init__(self, config: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        if not config.get("bootstrap.servers"):
            raise KafkaUnavailableError("Kafka client config has no 'bootstrap.servers'")
        self._timeout_s = timeout_s
        self._bootstrap = config["bootstrap.servers"]
        admin_config = {k: v for k, v in config.items() if k not in ADMIN_ONLY_DROPPED}
        self._errors = _ErrorLog(admin_config.get("error_cb"))
        admin_config["error_cb"] = self._errors
        # asking for one topic's metadata must never create it (librdkafka's default for this client type is
        # true, and a broker's auto.create.topics.enable is true unless set)
        admin_config["allow.auto.create.topics"] = False
        try:
            self._admin = AdminClient(admin_config)
        except (KafkaException, ValueError, TypeError) as exc:
            # librdkafka names the offending property, never its value
            raise KafkaUnavailableError(f"invalid Kafka client config for {self._bootstrap}: {exc}") from exc
        self._config = admin_config

    def _unavailable(self, what: str, exc: KafkaException | None = None) -> KafkaUnavailableError:
        """The error to raise when Kafka did not answer: names an authentication failure when it was one."""
        self._admin.poll(0)  # serve the queued error callbacks
        auth = self._errors.authentication_failure()
        if auth is not None and auth.code() == KafkaError._SSL:
            return KafkaAuthenticationError(
                f"Kafka at {self._bootstrap} could not be trusted ({what}): the broker's TLS certificate was not "
                f"verified: {auth.str()}; check ssl.ca.location (the CA that signed the broker's certificate) in the "
                "Kafka connection and that bootstrap.servers names a host the certificate is for"
            )
        if auth is not None:
            return KafkaAuthenticationError(
                f"Kafka at {self._bootstrap} rejected the client's credentials ({what}): authentication failed: "
                f"{auth.str()}; check sasl.mechanism, sasl.username and sasl.password in the Kafka connection"
            )
        detail = exc.args[0].str() if exc is not None and isinstance(exc.args[0], KafkaError) else str(exc or "")
        last = self._errors.last()
        if last is not None and last.str() not in detail:
            detail = f"{detail} (last client error: {last.str()})" if detail else last.str()
        return KafkaUnavailableError(
            f"Kafka at {self._bootstrap} did not answer within {self._timeout_s:g}s ({what}): {detail}"
        )

    def _metadata(self, topic: str) -> Any:
        """One topic's metadata within the timeout (a cluster's full metadata grows with its topics: on a
        test broker of a few hundred topics, 50-200 ms); fails at once when the broker rejects the credentials.

        librdkafka reports a refused login only to error_cb, so metadata is requested in growing
        windows and the callbacks are served between them.
        """
        deadline = time.monotonic() + self._timeout_s
        window = METADATA_WINDOW_S
        while True:
            started = time.monotonic()
            try:
                return self._admin.list_topics(topic=topic, timeout=max(0.01, min(window, deadline - started)))
            except KafkaException as exc:
                self._admin.poll(0)
                if self._errors.authentication_failure() is not None or deadline - time.monotonic() <= 0.01:
                    raise self._unavailable("listing topics", exc) from exc
                # failed before the window ended (no broker up at all): wait instead of spinning
                time.sleep(max(0.0, min(window - (time.monotonic() - started), deadline - time.monotonic())))
                window = min(window * 2, METADATA_WINDOW_MAX_S)

    def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        metas = {topic: self._metadata(topic).topics.get(topic) for topic in topics}
        unknown = KafkaError.UNKNOWN_TOPIC_OR_PART
        missing = [t for t, meta in metas.items() if meta is None or (meta.error and meta.error.code() == unknown)]
        if missing:
            raise UnknownTopicError(f"topic(s) {', '.join(sorted(missing))} not found in Kafka at {self._bootstrap}")
        result: list[TopicPartition] = []
        for topic, meta in metas.items():
            if meta.error is not None and meta.error.code() != KafkaError.NO_ERROR:
                raise KafkaUnavailableError(f"metadata for topic {topic!r} failed: {meta.error.str()}")
            result.extend(TopicPartition(topic, p) for p in meta.partitions)
        return sorted(result)

    def _list_offsets(self, tps: Sequence[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
        """Offsets of ``tps`` at ``spec``; a retriable error (a partition whose leader is moving, as right after
        the topic's creation or during a broker's restart) asks that partition again until the timeout."""
        deadline = time.monotonic() + self._timeout_s
        offsets: dict[TopicPartition, int] = {}
        pending = list(tps)
        while pending:
            request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in pending}
            futures = self._admin.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self._timeout_s
            )
            pending = []
            for ktp, future in futures.items():
                tp = TopicPartition(ktp.topic, ktp.partition)
                try:
                    offsets[tp] = int(future.result(timeout=max(0.01, deadline - time.monotonic())).offset)
                except KafkaException as exc:
                    kafka_error = exc.args[0] if isinstance(exc.args[0], KafkaError) else None
                    moving = kafka_error is not None and (
                        kafka_error.retriable() or kafka_error.code() in LEADER_MOVING
                    )
                    if moving and time.monotonic() < deadline - LIST_OFFSETS_RETRY_S:
                        pending.append(tp)
                        continue
                    error = self._unavailable(f"listing offsets of {tp}", exc)
                    if isinstance(error, KafkaAuthenticationError):
                        raise error from exc
                    raise KafkaUnavailableError(
                        f"listing offsets of {tp} at {self._bootstrap} failed: {exc.args[0]}"
                    ) from exc
            if pending:
                time.sleep(min(LIST_OFFSETS_RETRY_S, max(0.0, deadline - time.monotonic())))
        return offsets

    def offsets(self, topics: Sequence[str]) -> dict[TopicPartition, PartitionOffsets]:
        """Log start offset and last stable offset (read_committed end) of every partition."""
        tps = self.partitions(topics)
        if not tps:
            return {}
        earliest = self._list_offsets(tps, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        latest = self._list_offsets(tps, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        return {tp: PartitionOffsets(earliest=earliest[tp], latest=latest[tp]) for tp in tps}

    def retention(self, topics: Sequence[str]) -> dict[str, TopicRetention]:
        """Each topic's retention.ms, retention.bytes and cleanup.policy (the broker's defaults included)."""
        futures = self._admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in topics], request_timeout=self._timeout_s
        )
        found: dict[str, TopicRetention] = {}
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=self._timeout_s)
            except KafkaException as exc:
                raise KafkaUnavailableError(
                    f"describing the config of topic {resource.name} at {self._bootstrap} failed: {exc.args[0]}"
                ) from exc
            found[resource.name] = TopicRetention.from_configs({k: e.value for k, e in entries.items()})
        return found

    def _consumer(self) -> Consumer:
        """A throw-away consumer that never joins or commits to a group."""
        return Consumer(
            {
                **self._config,
                "group.id": f"airflow-kafka-offsets-probe-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )

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
            deadline = datetime.now(UTC).timestamp() + self._timeout_s
            while pending and datetime.now(UTC).timestamp() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                tp = TopicPartition(str(msg.topic()), int(msg.partition() or 0))
                if tp in pending:
                    _, millis = msg.timestamp()
                    result[tp] = datetime.fromtimestamp(millis / 1000, tz=UTC)
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
            raise KafkaUnavailableError(
                f"mirroring offsets into consumer group {group!r} failed: {exc.args[0]}"
            ) from exc
