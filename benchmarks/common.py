"""Shared helpers: environment for spark-submit, timing, statistics, machine description."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: Airflow's settings are made first (prepare_environment)
    from airflow_kafka_offsets.ledger import Ledger

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
MB = 1_000_000  # figures use decimal megabytes of Kafka payload (key + value bytes)
CONNECT_CONN_ID = "spark_connect_default"  # the local stack's Spark Connect server


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def prepare_environment(info: Any) -> None:
    """Connections, PATH and a throwaway AIRFLOW_HOME, before anything imports Airflow."""
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="ako-bench-airflow-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    # The Spark hook logs every spark-submit output line at INFO; the harness prints its own summary.
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    os.environ.update(info.airflow_env())
    os.environ["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP") or "127.0.0.1"
    path = os.environ.get("PATH", "")
    if not path.startswith(str(VENV_BIN)):
        os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{path}"


def now() -> float:
    return time.perf_counter()


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None (None when there are none)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def spread(values: Iterable[float | None]) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    if not present:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(present), "min": min(present), "max": max(present), "n": len(present)}


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_counters() -> list[int]:
    """The machine's CPU time counters (``/proc/stat``'s first line, in clock ticks); [] elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            return [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return []


def stolen_share(start: Sequence[int], end: Sequence[int]) -> float | None:
    """The share of CPU time the hypervisor gave to other machines between two counter samples.

    The load average does not show it: on a virtual machine whose host is busy, an otherwise idle
    machine runs everything slower, which is why each report prints it.
    """
    if len(start) < 8 or len(end) < 8:
        return None
    spent = [b - a for a, b in zip(start[:8], end[:8], strict=True)]
    total = sum(spent)
    return round(spent[7] / total, 3) if total > 0 else None


def run(
    argv: Sequence[str], *, timeout: float = 3600, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:3])}... exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
            f"\n--- stderr\n{result.stderr[-4000:]}"
        )
    return result


def parquet_rows(directory: str | Path) -> tuple[int, int, int]:
    """(rows, files, bytes) of the Parquet files under a directory, from the footers only."""
    import pyarrow.parquet as pq

    rows = files = size = 0
    for path in Path(directory).rglob("*.parquet"):
        if any(part.startswith(("_", ".")) for part in path.relative_to(directory).parts):
            continue
        rows += pq.ParquetFile(path).metadata.num_rows
        files += 1
        size += path.stat().st_size
    return rows, files, size


def _first_line(argv: Sequence[str]) -> str | None:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def _meminfo_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _version(value: Any) -> str:
    return str(value[0] if isinstance(value, tuple) else value)


def machine_info(info: Any, pg_version: str | None = None) -> dict[str, Any]:
    """Cores, memory and the versions of everything that took part."""
    import confluent_kafka
    import pyarrow
    import pyspark

    import airflow_kafka_offsets

    kafka_version = None
    for jar in Path(info.kafka_libs_dir).glob("kafka-clients-*.jar"):
        kafka_version = re.sub(r"^kafka-clients-|\.jar$", "", jar.name)
    connector = [Path(j).name for j in info.connector_jars]
    git = _first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = _first_line(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {
        "cpu_cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _meminfo_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": _first_line([shutil.which("java") or "java", "-version"]),
        "pyspark": pyspark.__version__,
        "spark_kafka_connector": connector,
        "kafka_broker": kafka_version,
        "confluent_kafka": (
            f"{_version(confluent_kafka.version())} (librdkafka {_version(confluent_kafka.libversion())})"
        ),
        "pyarrow": pyarrow.__version__,
        "postgresql": pg_version,
        "airflow_kafka_offsets": airflow_kafka_offsets.__version__,
        "git_commit": (git or "?") + ("+dirty" if dirty else ""),
        "loadavg_at_start": loadavg(),
        "cpu_counters_at_start": cpu_counters(),
    }


def dump_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)


def bench_ledger(info: Any) -> Ledger:
    """A throwaway ledger in a schema of its own on the stack's PostgreSQL (drop it with :func:`drop_ledger`)."""
    import psycopg2

    from airflow_kafka_offsets.ledger import Ledger

    ledger = Ledger(lambda: psycopg2.connect(info.pg_dsn()), schema=f"bench_{uuid.uuid4().hex[:10]}")
    ledger.migrate()
    return ledger


def drop_ledger(ledger: Any) -> None:
    with ledger.transaction() as tx:
        tx.execute("DROP SCHEMA {s} CASCADE")
