"""The network kinds' pure parts: which kinds a run may ask for with which options, and the verdict on a
try whose S3 or schema-registry link failed (it must name the component it lost)."""

from __future__ import annotations

import argparse

import pytest

from faults_harness.__main__ import refusal
from faults_harness.commit_hold import CATALOG_COMMIT, S3_COMMIT
from faults_harness.network_kinds import NETWORK_KINDS
from faults_harness.service_links import NEEDS, names_component, verdict


def options(**given: object) -> argparse.Namespace:
    base = {
        "kinds": [],
        "spark_connect": False,
        "network": True,
        "storage": "local",
        "sink": "directory",
        "avro": False,
        "no_raw_value": False,
    }
    return argparse.Namespace(**(base | given))


def test_the_service_kinds_are_network_kinds_each_naming_what_it_needs() -> None:
    assert list(NETWORK_KINDS) == [
        "ledger_blackhole",
        "kafka_cut",
        "kafka_blackhole",
        "connect_reset",
        "connect_blackhole",
        "slow_ledger",
        "s3_blackhole",
        "registry_cut",
    ]
    assert NEEDS == {"s3_blackhole": "--storage s3", "registry_cut": "--avro"}


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        ({"kinds": ["s3_blackhole"]}, "s3_blackhole faults the S3 server under the output: only with --storage s3"),
        ({"kinds": ["registry_cut"]}, "registry_cut cuts an Avro pipeline's schema registry: only with --avro"),
        (
            {"kinds": ["kafka_cut+registry_cut"], "network": False, "avro": True},
            "kafka_cut, registry_cut cut the workers' links through toxiproxy: only with --network",
        ),
        ({"kinds": ["s3_blackhole", "registry_cut"], "storage": "s3", "avro": True}, None),
        ({"kinds": ["ledger_blackhole"]}, None),
        (
            {"kinds": ["connect_reset"]},
            "connect_reset resets the Spark Connect server's link: only with --spark-connect",
        ),
        ({"kinds": ["connect_reset"], "spark_connect": True}, None),
        (
            {"kinds": ["kafka_cut", "spark_orphaned"], "spark_connect": True},
            "spark_orphaned kill or wait for spark-submit's processes: not with --spark-connect",
        ),
        ({"kinds": ["kafka_cut", "spark_orphaned"]}, None),  # through spark-submit, its processes too
        (
            {"kinds": ["s3_lost_answer"], "sink": "delta"},
            "s3_lost_answer loses the answer of a batch's commit PUT to S3: only with --storage s3 and --sink "
            "directory or delta or delta-multi or delta-merge",
        ),
        (
            {"kinds": ["s3_lost_answer"], "sink": "iceberg", "storage": "s3"},
            "s3_lost_answer loses the answer of a batch's commit PUT to S3: only with --storage s3 and --sink "
            "directory or delta or delta-multi or delta-merge",
        ),
        ({"kinds": ["kafka_cut+s3_lost_answer"], "sink": "delta-merge", "storage": "s3"}, None),
    ],
)
def test_a_kind_without_what_it_needs_is_refused_naming_it(given: dict, refused: str | None) -> None:
    assert refusal(options(**given)) == refused


@pytest.mark.parametrize(
    ("ok", "error", "proxy", "must_fail", "wrong"),
    [
        (False, "SparkObjectStoreError: S3 did not answer for s3a://b/x", "s3", False, None),
        (True, None, "s3", False, None),  # the clients' retries carried the try through
        (False, "ReportMismatchError: 3 records missing", "s3", False, "the try failed without naming s3: "),
        (False, "SchemaRegistryUnavailableError: the schema registry did not answer", "schema_registry", True, None),
        (True, None, "schema_registry", True, "the try should fail: nothing it needed was reachable"),
        (False, "killed by SIGKILL", "schema_registry", False, "the try failed without naming schema registry: "),
        (
            False,
            "SparkJobError: the Spark Connect server at h:1 did not answer (the schema registry did not answer); "
            "the attempt is lost. Next: check that the server runs and this worker reaches it (scripts/stack up)",
            "schema_registry",
            False,
            "the try blamed the Spark Connect server for the schema registry's link: ",
        ),
    ],
)
def test_a_failed_try_must_name_the_component_whose_link_failed(
    ok: bool, error: str | None, proxy: str, must_fail: bool, wrong: str | None
) -> None:
    said = verdict(ok, error, proxy, must_fail)
    assert said == wrong if wrong is None or not wrong.endswith(": ") else said.startswith(wrong)
    assert names_component("PUT s3://bucket/key timed out", "s3")


@pytest.mark.parametrize(
    ("request_line", "held"),
    [
        (b"PUT /bucket/out/events/_delta_log/00000000000000000007.json HTTP/1.1", True),
        (b"PUT /bucket/out/events/_delta_log/00000000000000000000.json HTTP/1.1", False),  # creates the table
        (b"PUT /bucket/out/p/batch%3D000000000003/_manifest HTTP/1.1", True),
        (b"GET /bucket/out/p/batch%3D000000000003/_manifest HTTP/1.1", False),
        (b"PUT /bucket/out/events/batch%3D000000000003/a1/part-00000.parquet HTTP/1.1", False),
        (b"PUT /bucket/out/events/_delta_log/_last_checkpoint HTTP/1.1", False),
    ],
)
def test_only_the_puts_that_commit_a_batch_to_s3_are_held(request_line: bytes, held: bool) -> None:
    assert bool(S3_COMMIT.match(request_line)) is held
    assert not CATALOG_COMMIT.match(request_line)
