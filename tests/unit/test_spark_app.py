"""The Spark app's pure parts and its contract with the package, without starting Spark."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from airflow_kafka_offsets.core.model import BatchPlan, PartitionRange
from airflow_kafka_offsets.service.jobs import build_job
from airflow_kafka_offsets.sinks.local import REPORT_NAME as SINK_REPORT_NAME
from airflow_kafka_offsets.spark import settings as spark_settings
from airflow_kafka_offsets.spark.versions import CONNECTOR_JAR as PACKAGE_CONNECTOR_JAR
from airflow_kafka_offsets.spark_apps import kafka_batch_contract as contract

# The app as it ships: the repository's spark_apps/ in a development install, the wheel's copy otherwise.
APPS = Path(contract.__file__).resolve().parent
sys.path.insert(0, str(APPS))  # the app imports its contract by file name, as under spark-submit --py-files
import kafka_batch_check as check  # noqa: E402
import kafka_batch_read as read_step  # noqa: E402
import kafka_range_batch as app  # noqa: E402

PLAN = BatchPlan("orders", 7, 0, (PartitionRange("t", 0, 10, 20, 10), PartitionRange("t", 1, 5, 5, 5)), "file:///o")


def test_app_and_package_share_one_contract_module() -> None:
    assert Path(app.contract.__file__).resolve() == Path(contract.__file__).resolve()
    assert app.contract.REPORT_NAME == SINK_REPORT_NAME == contract.REPORT_NAME
    assert check.contract is app.contract  # the app's modules import one another by file name under spark-submit
    assert app.read_step is read_step and read_step.contract is app.contract


def test_the_package_imports_the_app_with_its_sibling_contract() -> None:
    """Spark Connect mode runs the app in the worker's process, imported from the package."""
    from airflow_kafka_offsets.spark_apps import kafka_range_batch as packaged

    assert packaged.contract is contract
    assert Path(packaged.__file__).read_text() == Path(app.__file__).read_text()
    assert PACKAGE_CONNECTOR_JAR is contract.CONNECTOR_JAR


def test_app_imports_nothing_from_airflow_or_the_package() -> None:
    for path in APPS.glob("*.py"):
        tree = ast.parse(path.read_text())
        modules = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in modules if m.split(".")[0] in ("airflow", "airflow_kafka_offsets")}, path


def test_submitter_ships_every_module_of_the_app_beside_it() -> None:
    shipped = {name: Path(spark_settings.app_file(name)).read_text() for name in spark_settings.APP_MODULES}
    on_disk = {path.name: path.read_text() for path in APPS.glob("kafka_batch_*.py")}
    assert shipped == on_disk
    assert Path(spark_settings.app_file()).name == "kafka_range_batch.py"


def test_job_built_by_the_package_is_loaded_by_the_app(tmp_path: Path) -> None:
    job = build_job(PLAN, "a1", "file:///staging", {"bootstrap.servers": "b:9092"}, min_partitions=None)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    loaded = app.load_job(str(path))
    assert loaded["ranges"] == [{"topic": "t", "partition": 0, "start": 10, "end": 20}]  # the empty range is not read
    assert loaded["kafka"] == {"bootstrap.servers": "b:9092"}


def test_app_refuses_another_job_format(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="unsupported job format 99, expected 1"):
        app.load_job(str(path))
    with pytest.raises(FileNotFoundError, match="job file"):
        app.load_job(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("spans", "parallelism", "configured", "expected"),
    [
        ([100], 2, None, 2),  # one short range on two cores: split in two
        ([100, 100], 2, None, None),  # as many ranges as cores: Spark's default
        ([100, 100, 100], 2, None, None),
        ([2_500_000], 2, None, 3),  # about one task per million records
        ([3_000_000, 10], 8, None, 8),
        ([100], 2, 5, 5),  # the job's own setting wins
    ],
)
def test_wanted_partitions(spans: list[int], parallelism: int, configured: int | None, expected: int | None) -> None:
    ranges = [{"topic": "t", "partition": i, "start": 1000, "end": 1000 + s} for i, s in enumerate(spans)]
    assert read_step.wanted_partitions(ranges, parallelism, configured) == expected


def summary(partition: int, records: int, low: int | None, high: int | None, distinct: int) -> dict[str, object]:
    return {
        "topic": "t",
        "partition": partition,
        "records": records,
        "min_offset": low,
        "max_offset": high,
        "distinct_offsets": distinct,
    }


RANGES = [{"topic": "t", "partition": 0, "start": 10, "end": 20}]


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        (summary(0, 10, 10, 19, 10), None),
        (summary(0, 3, 12, 18, 3), None),  # gaps are allowed
        (summary(0, 0, None, None, 0), None),
        (summary(0, 2, 10, 10, 1), "t-0: 2 records but 1 distinct offsets"),
        (summary(0, 11, 10, 19, 11), "t-0: 11 records exceed the planned span 10"),
        (summary(0, 1, 20, 20, 1), "t-0: offsets [20, 20] outside the planned range [10, 20)"),
        (summary(0, 1, 9, 9, 1), "t-0: offsets [9, 9] outside the planned range [10, 20)"),
        (summary(0, 1, None, None, 1), "t-0: offsets [None, None] outside the planned range [10, 20)"),
        (summary(3, 1, 5, 5, 1), "t-3: 1 records from a partition not in the plan"),
    ],
)
def test_range_check_shared_by_app_and_package(part: dict[str, object], problem: str | None) -> None:
    assert contract.range_problems(RANGES, [part]) == ([problem] if problem else [])
    if problem:
        with pytest.raises(
            check.BatchCheckError, match=problem.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
        ):
            check.check_against_ranges({"ranges": RANGES}, [part])
    else:
        check.check_against_ranges({"ranges": RANGES}, [part])


def test_reader_options_read_the_exact_ranges_with_read_tuned_fetches_that_the_connection_can_override() -> None:
    job = {
        "ranges": [
            {"topic": "orders", "partition": 0, "start": 5, "end": 9},
            {"topic": "orders", "partition": 3, "start": 0, "end": 2},
        ],
        "kafka": {"bootstrap.servers": "b:9092", "max.poll.records": 700, "isolation.level": "read_uncommitted"},
    }
    options = read_step.reader_options(job, tasks=None)
    assert json.loads(options["assign"]) == {"orders": [0, 3]}
    assert json.loads(options["startingOffsets"]) == {"orders": {"0": 5, "3": 0}}
    assert json.loads(options["endingOffsets"]) == {"orders": {"0": 9, "3": 2}}
    assert options["failOnDataLoss"] == "true" and "minPartitions" not in options
    assert options["kafka.bootstrap.servers"] == "b:9092"
    assert options["kafka.max.poll.records"] == "700"
    assert options["kafka.fetch.max.wait.ms"] == "0"  # the app's default
    job["kafka"].pop("max.poll.records")
    assert read_step.reader_options(job, tasks=None)["kafka.max.poll.records"] == "5000"  # the app's default
    job["kafka"]["fetch.max.wait.ms"] = 100
    assert read_step.reader_options(job, tasks=None)["kafka.fetch.max.wait.ms"] == "100"  # the connection wins
    assert options["kafka.isolation.level"] == "read_committed"  # no client setting weakens it
    assert read_step.reader_options(job, tasks=6)["minPartitions"] == "6"


def test_the_twins_summary_of_rows_counts_records_offsets_duplicates_and_errors() -> None:
    rows = [("a", 0, 64, 3, False), ("a", 0, 0, 2, True), ("a", 0, 64, 3, False), ("b", 1, 9, 0, False)]
    rows += [("a", 1, offset, 1, False) for offset in range(5, 105, 10)]
    assert contract.summarize_rows(rows, decoding=True) == [
        {"topic": "a", "partition": 0, "records": 3, "min_offset": 0, "max_offset": 64, "distinct_offsets": 2,
         "payload_bytes": 8, "decode_errors": 1},
        {"topic": "a", "partition": 1, "records": 10, "min_offset": 5, "max_offset": 95, "distinct_offsets": 10,
         "payload_bytes": 10, "decode_errors": 0},
        {"topic": "b", "partition": 1, "records": 1, "min_offset": 9, "max_offset": 9, "distinct_offsets": 1,
         "payload_bytes": 0, "decode_errors": 0},
    ]  # fmt: skip
    assert contract.summarize_rows(rows)[0] == {
        "topic": "a", "partition": 0, "records": 3, "min_offset": 0, "max_offset": 64, "distinct_offsets": 2,
        "payload_bytes": 8,
    }  # fmt: skip
    assert contract.summarize_rows([]) == []
