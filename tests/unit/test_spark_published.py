"""The connector release a batch gets when its Spark's own is not served (the lookup itself: the
integration test against Maven Central, tests/integration/test_spark_published.py)."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.spark.published import (
    AVRO_ARTIFACTS,
    CONNECTOR_ARTIFACTS,
    KNOWN_RELEASES,
    MAVEN_CENTRAL,
    metadata_versions,
    nearest_release,
    repositories,
    shown,
)


@pytest.mark.parametrize(
    ("version", "published", "chosen"),
    [
        ("4.0.3", ["4.0.0", "4.1.1", "4.2.0"], "4.0.0"),  # only the line's own count
        ("4.0.3", ["4.0.0", "4.0.3", "4.0.4"], "4.0.3"),  # the release itself when served
        ("4.0.2", ["4.0.0", "4.0.4"], "4.0.0"),  # equally close: the older
        ("4.0.2", ["4.0.0", "4.0.3"], "4.0.3"),  # else the closest, newer or older
        ("3.5.1-amzn-0", ["3.5.0", "3.5.3"], "3.5.0"),  # a vendor suffix is the release's
        ("4.1.2", ["4.1.0-preview4", "4.2.0"], None),  # previews are no release
    ],
)
def test_the_nearest_published_release_of_the_line(version: str, published: list[str], chosen: str | None) -> None:
    assert nearest_release(version, published) == chosen


def test_maven_metadata_versions() -> None:
    xml = b"""<?xml version="1.0" encoding="UTF-8"?>
<metadata><groupId>org.apache.spark</groupId><artifactId>spark-token-provider-kafka-0-10_2.13</artifactId>
<versioning><latest>4.2.0</latest><release>4.2.0</release>
<versions><version>4.0.0</version><version>4.1.1</version><version>4.2.0</version></versions>
</versioning></metadata>"""
    assert metadata_versions(xml) == {"4.0.0", "4.1.1", "4.2.0"}


def test_repositories_are_sparks_own_and_shown_without_credentials() -> None:
    conf = {"spark.jars.repositories": "https://user:secret@repo.example.com/maven/ , https://b.example.com/m2"}
    assert repositories(conf) == (
        "https://user:secret@repo.example.com/maven",
        "https://b.example.com/m2",
        MAVEN_CENTRAL,
    )
    assert shown(repositories(conf)[0]) == "https://repo.example.com/maven"
    assert repositories({}) == (MAVEN_CENTRAL,)


def test_the_fallback_table_has_a_release_for_every_supported_line() -> None:
    from airflow_kafka_offsets.spark.versions import SUPPORTED_LINES
    from airflow_kafka_offsets.spark_apps.kafka_batch_contract import scala_binary_version

    assert sorted(KNOWN_RELEASES) == sorted([CONNECTOR_ARTIFACTS, AVRO_ARTIFACTS])
    for by_line in KNOWN_RELEASES.values():
        assert sorted(by_line) == sorted((line, scala_binary_version(line + ".0")) for line in SUPPORTED_LINES)
        for (line, _), releases in by_line.items():
            assert releases and all(nearest_release(r, [r]) == r and r.startswith(line + ".") for r in releases)
