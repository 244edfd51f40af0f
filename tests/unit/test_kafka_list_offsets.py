"""Listing offsets asks again for a partition whose leader is moving, and gives up on anything else."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec

from airflow_kafka_offsets.clients.kafka import KafkaOffsetsClient
from airflow_kafka_offsets.core.model import TopicPartition
from airflow_kafka_offsets.errors import KafkaUnavailableError


class ScriptedAdmin:
    """Answers list_offsets from a script: per call, per partition, an offset or a Kafka error code."""

    def __init__(self, script: list[dict[int, int]]) -> None:
        self.script = script
        self.asked: list[list[int]] = []

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future]:
        answers = self.script.pop(0)
        self.asked.append(sorted(ktp.partition for ktp in request))
        futures: dict[Any, Future] = {}
        for ktp in request:
            future: Future = Future()
            answer = answers[ktp.partition]
            if answer < 0:
                future.set_exception(KafkaException(KafkaError(-answer)))
            else:
                future.set_result(SimpleNamespace(offset=answer))
            futures[ktp] = future
        return futures

    def poll(self, _: float) -> None:
        return None


def client_with(admin: ScriptedAdmin, timeout_s: float = 5.0) -> KafkaOffsetsClient:
    client = KafkaOffsetsClient({"bootstrap.servers": "127.0.0.1:9"}, timeout_s=timeout_s)
    client._admin = admin  # type: ignore[assignment]
    return client


TPS = [TopicPartition("t", 0), TopicPartition("t", 1)]
NOT_LEADER = -KafkaError.NOT_LEADER_FOR_PARTITION


def test_a_partition_whose_leader_moved_is_asked_again_alone() -> None:
    admin = ScriptedAdmin([{0: 7, 1: NOT_LEADER}, {1: NOT_LEADER}, {1: 11}])
    assert client_with(admin)._list_offsets(TPS, OffsetSpec.latest()) == {TPS[0]: 7, TPS[1]: 11}
    assert admin.asked == [[0, 1], [1], [1]]


def test_an_error_no_retry_fixes_fails_at_once_naming_the_partition() -> None:
    admin = ScriptedAdmin([{0: 7, 1: -KafkaError.TOPIC_AUTHORIZATION_FAILED}])
    with pytest.raises(KafkaUnavailableError, match=r"listing offsets of t-1 at 127\.0\.0\.1:9 failed"):
        client_with(admin)._list_offsets(TPS, OffsetSpec.latest())
    assert admin.asked == [[0, 1]]


def test_a_leader_that_never_settles_fails_within_the_timeout() -> None:
    admin = ScriptedAdmin([{0: 7, 1: NOT_LEADER}] + [{1: NOT_LEADER}] * 100)
    with pytest.raises(KafkaUnavailableError, match="Not leader for partition"):
        client_with(admin, timeout_s=1.0)._list_offsets(TPS, OffsetSpec.latest())
    assert 2 <= len(admin.asked) <= 6
