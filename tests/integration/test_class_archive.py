"""The driver JVM's class-data-sharing archive under real spark-submit.

The first batch writes the archive when its driver exits; the second maps it, which ``-Xshare:on``
proves: with that option a JVM that cannot map its archive does not start. Both read exactly
their ranges. A connection in cluster deploy mode, or a directory with whitespace, is refused
by the check that runs before the ledger is written.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.runtime import settings_runner
from airflow_kafka_offsets.service.jobs import build_job
from airflow_kafka_offsets.spark.settings import SparkSettings

from .helpers import local_path, produce

pytestmark = pytest.mark.integration


def test_the_first_batch_writes_the_archive_and_the_next_maps_it(stack, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produced = produce(stack.bootstrap_servers, topic, 80, partitions=2)
    archive_dir = tmp_path / "jvm"
    kafka = {"bootstrap.servers": stack.bootstrap_servers}
    batches = [
        ("a1", {}, (PartitionRange(topic, 0, 0, 20, 0), PartitionRange(topic, 1, 0, 20, 0))),
        ("a2", {"spark.driver.extraJavaOptions": "-Xshare:on"}, (PartitionRange(topic, 0, 20, 40, 20),)),
    ]
    for attempt, conf, ranges in batches:
        settings = SparkSettings(jars=stack.connector_jars, conf=conf, class_archive_dir=str(archive_dir))
        staging = (tmp_path / attempt).as_uri()
        settings_runner(settings)(build_job(BatchPlan("cds", 1, 0, ranges, "unused"), attempt, staging, kafka))
        (archive,) = archive_dir.iterdir()  # written by the first batch, mapped by the second: no other file
        assert archive.name.startswith("spark-driver-") and archive.suffix == ".jsa"
        rows = pq.read_table(local_path(staging)).to_pylist()
        got = sorted((r["partition"], r["offset"], r["key"].decode()) for r in rows)
        expected = sorted(
            (p["partition"], p["offset"], p["id"])
            for p in produced
            for r in ranges
            if p["partition"] == r.partition and r.start <= p["offset"] < r.end
        )
        assert got == expected and len(got) == sum(r.end - r.start for r in ranges)


def test_an_archive_for_a_cluster_mode_driver_or_in_a_path_with_whitespace_is_refused(stack, monkeypatch, tmp_path):
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER_MODE",
        json.dumps({"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "cluster"}}),
    )
    settings = SparkSettings(conn_id="spark_cluster_mode", jars=stack.connector_jars, class_archive_dir=str(tmp_path))
    with pytest.raises(ConfigurationError, match="'spark_cluster_mode' runs the driver in cluster deploy mode"):
        settings_runner(settings).check()
    local = SparkSettings(jars=stack.connector_jars, class_archive_dir=f"{tmp_path}/my jvm")
    with pytest.raises(ConfigurationError, match=r"spark_class_archive_dir .* must be a path without whitespace"):
        settings_runner(local).check()
    assert list(tmp_path.iterdir()) == []
