"""spark-submit application of ``profile_setup.py``: the package's Spark app, or the trivial app, with timestamps.

With ``--job-file`` it runs ``spark_apps/kafka_range_batch.py`` (or ``$AKO_TIMED_APP``) unchanged
except that its steps are wrapped to note when they start and end; without, it runs
``trivial_app.py`` the same way. At exit it writes ``{"marks": [[name, epoch seconds], ...]}`` to
``$AKO_TIMING_FILE``. The marks are what Spark's event log cannot show: the Python driver's start,
the JVM's start, the session, each check, the write and read-back calls, the report, the stop.
"""

from __future__ import annotations

import time

MARKS: list[tuple[str, float]] = [("python driver started", time.time())]

import atexit  # noqa: E402 - the first mark is taken before anything else loads
import functools  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

from pyspark.sql import DataFrameWriter, SparkSession  # noqa: E402
from pyspark.sql.classic.dataframe import DataFrame  # noqa: E402 - what spark.range returns under spark-submit

MARKS.append(("pyspark imported", time.time()))
REPO = Path(__file__).resolve().parents[1]


def mark(name: str) -> None:
    MARKS.append((name, time.time()))


def timed(owner: Any, attribute: str, label: str) -> None:
    """Replace ``owner.attribute`` by a wrapper marking ``label`` start and end."""
    original: Callable[..., Any] = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(f"{label} start")
        try:
            return original(*args, **kwargs)
        finally:
            mark(f"{label} end")

    setattr(owner, attribute, wrapper)


def session_marks() -> None:
    """The session's start marks the JVM's own start time (the JVM started before this Python)."""
    original = SparkSession.Builder.getOrCreate

    def get_or_create(builder: SparkSession.Builder) -> SparkSession:
        mark("getOrCreate start")
        spark = original(builder)
        mark("getOrCreate end (SparkSession ready)")
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # a classic session: spark-submit's driver
        runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        MARKS.append(("JVM started", runtime.getStartTime() / 1000))
        return spark

    setattr(SparkSession.Builder, "getOrCreate", get_or_create)  # noqa: B010 - a patched method, as timed() does
    timed(SparkSession, "stop", "spark.stop()")


def load(path: Path) -> ModuleType:
    """Import a Spark app file as spark-submit runs it: its directory on sys.path, no package."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package_app() -> ModuleType:
    app = load(Path(os.environ.get("AKO_TIMED_APP") or REPO / "spark_apps" / "kafka_range_batch.py"))
    mark("app imported")
    timed(app, "load_job", "load job file")
    timed(app.contract, "apply_private_conf", "apply private conf")
    timed(app.read_step.JvmRuntime, "check_versions", "check versions")
    timed(app.read_step.JvmRuntime, "parallelism", "default parallelism")
    timed(app.read_step, "read_ranges", "build Kafka DataFrame")
    timed(DataFrameWriter, "parquet", "Parquet write")
    timed(app.read_step.JvmRuntime, "footers", "read footers")
    timed(app.check, "prove_written", "proof")
    timed(app.read_step.JvmRuntime, "output_bytes", "output size")
    timed(app.read_step.JvmRuntime, "write_report", "report write")
    return app


def trivial_app() -> ModuleType:
    app = load(REPO / "benchmarks" / "trivial_app.py")
    mark("app imported")
    timed(DataFrame, "count", "spark.range(10).count()")
    return app


def write_marks() -> None:
    mark("python driver exiting")
    target = os.environ.get("AKO_TIMING_FILE")
    if target:
        Path(target).write_text(json.dumps({"marks": MARKS}))


def main() -> int:
    atexit.register(write_marks)
    session_marks()
    if "--job-file" in sys.argv:
        return int(package_app().main(sys.argv[1:]))
    return int(trivial_app().main())


if __name__ == "__main__":
    sys.exit(main())
