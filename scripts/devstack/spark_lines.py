"""A Spark home of each supported Spark line, beside (never inside) the Airflow worker's venv.

Why: the package takes the cluster's Spark version from the Spark connection (the ``spark-submit``
found on PATH), not from the worker's pyspark, which constraints.txt pins. Tests and the
compatibility matrix need a "cluster" Spark of each line on this machine, so each one is a pyspark
of that version installed with ``pip install --no-deps --target`` into its own directory::

    <cache>/spark-<version>/site/            pyspark and the py4j it requires (nothing else)
    <cache>/spark-<version>/site/pyspark/    the Spark home: bin/spark-submit, jars/, conf/
    <home>/conf/spark-env.sh                 puts <site> first on PYTHONPATH (see spark_env_sh)
    <cache>/spark-<version>/.complete        written last, once the checks below passed

A home is only marked complete after its own ``bin/spark-submit`` (found on PATH, SPARK_HOME
unset) reports the version and a PySpark app it runs, with the worker venv's Python as
PYSPARK_PYTHON, sees that version in the driver's Python, the JVM and an executor's Python.
The line the worker's pyspark belongs to needs no install: its home is that pyspark's directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import jars, procs, state
from .errors import StackError

# The newest release per line whose Kafka connector Maven Central serves (pyspark 4.2.1 and
# 4.3.0 are on PyPI but spark-sql-kafka-0-10 is not, for them).
SPARK_LINES: dict[str, str] = {"3.5": "3.5.7", "4.0": "4.0.3", "4.1": "4.1.2", "4.2": "4.2.0"}
# Scala binary version per Spark major version: the suffix of every Spark artifact (_2.12, _2.13).
SCALA_BY_MAJOR: dict[str, str] = {"3": "2.12", "4": "2.13"}
INSTALL_TIMEOUT_S = 1800
CHECK_TIMEOUT_S = 300
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_SUBMIT_VERSION_RE = re.compile(r"\bversion (\d+\.\d+\.\d+\S*)")
PROBE_PREFIX = "AKO_SPARK_LINE_PROBE "
# What the checking app reports: pyspark as the driver's Python imports it, the JVM's Spark,
# pyspark as a Python worker (an executor's Python) imports it, and the pyspark distribution
# importlib.metadata finds first on sys.path (the site's only through conf/spark-env.sh: Spark's
# own runners put just <home>/python/lib/pyspark.zip first). Spark 3.5 to 4.2 all run it.
PROBE_APP = f"""\
import importlib.metadata
import json
import pyspark
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("ako spark line probe").getOrCreate()
executor = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__version__).collect()[0]
print({PROBE_PREFIX!r} + json.dumps({{
    "python": pyspark.__version__,
    "pyspark_file": pyspark.__file__,
    "distribution": importlib.metadata.version("pyspark"),
    "jvm": spark.version,
    "executor_python": executor,
}}), flush=True)
spark.stop()
"""


def resolve(version_or_line: str | None) -> str:
    """A full Spark version: ``None`` is the worker's pyspark, a line (``"4.1"``) its table entry."""
    if version_or_line is None:
        return jars.default_spark_version()
    value = version_or_line.strip()
    if value in SPARK_LINES:
        return SPARK_LINES[value]
    if not _VERSION_RE.match(value):
        raise StackError(f"not a Spark version or line: {value!r} (lines: {', '.join(SPARK_LINES)})")
    scala_binary_version(value)  # refuses a major version the stack knows nothing of
    return value


def line_of(version: str) -> str:
    """``"3.5.7"`` -> ``"3.5"``."""
    return ".".join(version.split(".")[:2])


def scala_binary_version(version: str) -> str:
    """The Scala binary version of a Spark release's artifacts: 2.12 for 3.x, 2.13 for 4.x."""
    major = version.split(".")[0]
    if major not in SCALA_BY_MAJOR:
        raise StackError(f"Spark {version}: the dev stack knows Spark {' and '.join(SCALA_BY_MAJOR)}.x only")
    return SCALA_BY_MAJOR[major]


def install_dir(version: str) -> Path:
    """``<cache>/spark-<version>``: one per release, so lines never share files."""
    return state.cache_dir() / f"spark-{version}"


def site_dir(version: str) -> Path:
    """The ``pip --target`` directory: what PYTHONPATH must hold for this line's pyspark."""
    return install_dir(version) / "site"


def home_dir(version: str) -> Path:
    """The Spark home inside the pip target: pyspark's package dir (bin/, jars/)."""
    return site_dir(version) / "pyspark"


def is_worker_version(version: str) -> bool:
    """True when the worker venv's own pyspark (with its jars) is this release: nothing to install."""
    return version == jars.pyspark_version() and jars.pyspark_home() is not None


def spark_env_sh(site: Path, version: str) -> str:
    """``conf/spark-env.sh`` of a line's home.

    spark-submit and spark-class source it (``bin/load-spark-env.sh``, with ``set -a``) before the
    JVM starts, so the JVM's environment, and from it the driver's Python (PythonRunner) and every
    Python worker (PythonWorkerFactory), has ``<site>`` on PYTHONPATH ahead of the interpreter's
    own site-packages: they import this line's pyspark and py4j, not the worker venv's. (Spark's
    runners also put the wheel's ``<home>/python/lib/pyspark.zip`` first; without the site the
    venv's py4j and pyspark distribution metadata would still be found.) A PYTHONPATH the
    caller set stays, after it.
    """
    return (
        f"# Written by the airflow-kafka-offsets dev stack for pyspark {version}: the driver's and the\n"
        "# executors' Python import this Spark home's pyspark, not the one of the interpreter running them.\n"
        f'PYTHONPATH={shlex.quote(str(site))}"${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        "export PYTHONPATH\n"
    )


def py4j_requirement(metadata: str) -> str:
    """The unconditional ``Requires-Dist: py4j...`` of pyspark's METADATA, as a pip requirement."""
    for line in metadata.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "requires-dist" and ";" not in value:
            requirement = value.strip().replace(" ", "")
            if re.match(r"^py4j\b", requirement, re.IGNORECASE):
                return requirement
    raise StackError("pyspark's METADATA names no py4j requirement")


def submit_version(output: str) -> str | None:
    """The version in ``spark-submit --version``'s banner (``... version 3.5.7``)."""
    match = _SUBMIT_VERSION_RE.search(output)
    return match.group(1) if match else None


def submit_env(home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for running a line's ``bin/spark-submit`` (or spark-class) as its own Spark.

    SPARK_HOME is set to the home (a pip-installed home finds itself without it, but an inherited
    one would win). SPARK_CONF_DIR points at its conf/ and SPARK_ENV_LOADED goes, or
    load-spark-env.sh would skip this home's spark-env.sh (the variable leaks from any Spark
    process into its children). A Connect mark inherited from a client would make a classic
    session refuse to start.
    """
    env = dict(os.environ if base is None else base)
    for key in ("SPARK_ENV_LOADED", "SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):
        env.pop(key, None)
    env.update({"SPARK_HOME": str(home), "SPARK_CONF_DIR": str(home / "conf"), "SPARK_LOCAL_IP": state.LOOPBACK})
    return env


def spark_home(version: str | None = None, quiet: bool = False) -> Path:
    """The Spark home of ``version`` (a release or a line; default: the worker's pyspark), installed if needed.

    Idempotent: a complete install (its ``.complete`` marker) is returned as it is; an incomplete
    one is removed and done again. Installs of one release are serialised across processes.
    """
    version = resolve(version)
    if is_worker_version(version):
        home = jars.pyspark_home()
        assert home is not None
        return home
    dest = install_dir(version)
    if (dest / jars.MARKER).is_file():
        return home_dir(version)
    with state.cache_lock(dest):
        if not (dest / jars.MARKER).is_file():
            _install(version, dest, quiet)
    return home_dir(version)


def installed() -> dict[str, str]:
    """Spark homes ready on this machine, release -> home (the worker's pyspark included)."""
    homes: dict[str, str] = {}
    own = jars.pyspark_home()
    if own is not None and (version := jars.pyspark_version()):
        homes[version] = str(own)
    for marker in sorted(state.cache_dir().glob(f"spark-*/{jars.MARKER}")):
        version = marker.parent.name.removeprefix("spark-")
        if _VERSION_RE.match(version) and version not in homes:
            homes[version] = str(home_dir(version))
    return dict(sorted(homes.items(), key=lambda kv: [int(p) for p in kv[0].split(".")]))


def check_submit_version(home: Path) -> str:
    """Run ``spark-submit --version`` as a caller finds it on PATH (SPARK_HOME unset); return its version.

    A pip-installed home without ``bin/find_spark_home.py`` takes its own parent as SPARK_HOME, so
    the spark-submit first on PATH decides which Spark runs: what a Spark connection relies on.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_ENV_LOADED")}
    env["PATH"] = f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        ["spark-submit", "--version"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    found = submit_version(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-15:])
        raise StackError(f"{home}/bin/spark-submit --version failed (exit {proc.returncode}):\n{tail}")
    return found


def probe(home: Path, python: str | None = None, workdir: Path | None = None) -> dict[str, Any]:
    """Run :data:`PROBE_APP` through the home's spark-submit (``local[1]``), ``python`` (default: this
    interpreter, the worker venv's) as PYSPARK_PYTHON; return what the app saw (see PROBE_APP)."""
    workdir = workdir or home.parent.parent
    app = workdir / "probe_app.py"
    app.write_text(PROBE_APP)
    env = submit_env(home)
    env["PYSPARK_PYTHON"] = python or sys.executable
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    argv = [str(home / "bin" / "spark-submit"), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    argv += ["--conf", "spark.log.level=WARN", str(app)]
    proc = procs.run(argv, f"the probe app on {home}", cwd=workdir, env=env, timeout=CHECK_TIMEOUT_S)
    for line in proc.stdout.splitlines():
        if line.startswith(PROBE_PREFIX):
            result: dict[str, Any] = json.loads(line.removeprefix(PROBE_PREFIX))
            return result
    raise StackError(f"the probe app on {home} printed no result; its output:\n{proc.stdout[-2000:]}")


def _install(version: str, dest: Path, quiet: bool) -> None:
    started = time.monotonic()
    if dest.exists():
        shutil.rmtree(dest)  # an earlier install that never wrote its marker
    site = site_dir(version)
    site.mkdir(parents=True)
    _log(f"installing pyspark {version} into {site} (a ~300-450 MB sdist: about a minute or two) ...", quiet)
    _pip_target(site, f"pyspark=={version}")
    metadata = site / f"pyspark-{version}.dist-info" / "METADATA"
    if not metadata.is_file():
        raise StackError(f"pip installed no pyspark {version} into {site} (no {metadata.name})")
    py4j = py4j_requirement(metadata.read_text())
    _pip_target(site, py4j)
    # pip --target also copies pyspark's scripts to <site>/bin; those find SPARK_HOME through
    # whichever python3 is on PATH (the worker's pyspark). The home's own bin/ is the only one.
    shutil.rmtree(site / "bin", ignore_errors=True)
    home = home_dir(version)
    if (home / "bin" / "find_spark_home.py").exists():
        raise StackError(f"{home}/bin/find_spark_home.py exists: its spark-submit would not find its own home")
    (home / "conf").mkdir(exist_ok=True)
    (home / "conf" / "spark-env.sh").write_text(spark_env_sh(site, version))
    installed_s = time.monotonic() - started
    reported = check_submit_version(home)
    if reported != version:
        raise StackError(f"{home}/bin/spark-submit --version reports {reported}, not {version}")
    seen = probe(home, workdir=dest)
    if {seen["python"], seen["jvm"], seen["executor_python"], seen["distribution"]} != {version}:
        raise StackError(f"the probe app on the Spark {version} home saw other versions: {seen}")
    meta = {
        "spark.version": version,
        "scala.binary.version": scala_binary_version(version),
        "py4j": py4j,
        "home": str(home),
        "probe": seen,
        "install_seconds": round(installed_s, 1),
        "check_seconds": round(time.monotonic() - started - installed_s, 1),
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (dest / jars.MARKER).write_text(json.dumps(meta, indent=2) + "\n")
    _log(f"Spark {version} home ready in {time.monotonic() - started:.0f}s: {home}", quiet)


def _pip_target(site: Path, requirement: str) -> None:
    """``<venv python> -m pip install --no-deps --target <site> <requirement>``.

    pip builds pyspark's sdist in an isolated build environment (setuptools from the index) and
    keeps the built wheel in its cache, so a second install of a release takes seconds.
    """
    argv = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q"]
    argv += ["--no-deps", "--target", str(site), requirement]
    procs.run(argv, f"pip install {requirement}", timeout=INSTALL_TIMEOUT_S)


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"devstack: {msg}", file=sys.stderr, flush=True)
