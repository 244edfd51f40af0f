"""The package on every older Airflow line it supports: per line a venv pinned by
``constraints/airflow-<line>.txt`` (cached outside the work tree, built once), the package's wheel built
from this clone and installed into it on every run, then the unit tests, the line's smoke
(tests/integration/test_airflow_line.py) and the browser checks of the pipelines page and the
manual-operations trigger form (``LINE_TESTS``) on the running local stack. The pinned line
(constraints.txt) runs in .venv with the main suite.
``--update-docs`` writes docs/airflow.md's table from ``out/airflow-lines/<line>.json`` (what the smoke
found on each line).

Usage: scripts/airflow-matrix [--lines 3.1,3.2] [--build-only] [--update-docs]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLDER_LINES = ("3.1", "3.2")
PINNED_LINE = "3.3"
RESULTS = ROOT / "out" / "airflow-lines"
DOC = ROOT / "docs" / "airflow.md"
START, END = "<!-- airflow-lines:start -->", "<!-- airflow-lines:end -->"
# The line's smoke, and in a headless browser against one real deployment of the line's Airflow the Kafka
# pipelines page opened from Airflow's navigation and the manual-operations trigger form (status and a reset
# dry run, and bad input refused; its replay, two minutes of Spark whatever the line, runs on the pinned line).
LINE_TESTS = (
    "tests/integration/test_airflow_line.py",
    "tests/integration/test_pipelines_page.py::test_page_opens_from_airflow_navigation_in_the_browser",
    "tests/integration/test_manual_ops_ui.py::test_trigger_form_runs_status_and_a_dry_run_reset",
    "tests/integration/test_manual_ops_ui.py::test_trigger_form_refuses_bad_input_in_the_page",
)
CACHE = Path(os.environ.get("AKO_CACHE_DIR", Path.home() / ".cache" / "airflow-kafka-offsets")) / "venvs"
PYTHON = os.environ.get("PYTHON", "python3.11")


def constraints(line: str) -> Path:
    return ROOT / "constraints" / f"airflow-{line}.txt"


def venv_dir(line: str) -> Path:
    """The line's venv: named by a hash of its constraints file and the package's dependencies, so a
    change of either builds a new one and an unchanged one is reused."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = json.dumps([project["dependencies"], project["optional-dependencies"]], sort_keys=True)
    digest = hashlib.sha256(constraints(line).read_bytes() + deps.encode()).hexdigest()[:12]
    return CACHE / f"airflow-{line}-{digest}"


def run(*args: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in args], check=True, **kwargs)  # type: ignore[call-overload]


def build_wheel(into: Path) -> Path:
    """The package's wheel from this clone, as a user would install it."""
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", into, ROOT)
    (wheel,) = into.glob("airflow_kafka_offsets-*.whl")
    return wheel


def ensure_venv(line: str, wheel: Path) -> Path:
    """The line's cached venv with the wheel's dependencies (first run: a few minutes), and this clone's
    wheel installed into it (every run: seconds)."""
    venv = venv_dir(line)
    if not (venv / ".complete").exists():
        print(f"airflow-matrix: building {venv} (Airflow {line}, pinned by {constraints(line).name})", flush=True)
        shutil.rmtree(venv, ignore_errors=True)
        run(PYTHON, "-m", "venv", venv)
        run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--upgrade", "pip")
        run(venv / "bin" / "python", "-m", "pip", "install", "-q", "-c", constraints(line), f"{wheel}[test]")
        (venv / ".complete").write_text(constraints(line).name + "\n")
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel)
    return venv


def test_line(line: str, venv: Path, pytest_args: list[str]) -> bool:
    """The unit tests and ``LINE_TESTS`` in the line's venv, against the installed wheel (pytest's
    importlib mode and no current directory on sys.path: this clone's sources are not imported)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "AIRFLOW_HOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["AKO_AIRFLOW_MATRIX"] = line
    # No current directory on any of its interpreters' paths: pytest's (-P) and its xdist workers', which
    # execnet starts with `python -c` (the clone's airflow_kafka_offsets/ would shadow the wheel).
    env["PYTHONSAFEPATH"] = "1"
    # The exactly-once model test is pure logic that no Airflow line changes: its thousand histories run
    # with the pinned line; here a short run proves it imports and runs.
    env.setdefault("AKO_MODEL_EXAMPLES", "50")
    # The repository's benchmarks package (its report's tests are among the unit tests), without the
    # repository's root, whose airflow_kafka_offsets/ would shadow the installed wheel.
    with tempfile.TemporaryDirectory(prefix="ako-matrix-path-") as shim:
        (Path(shim) / "benchmarks").symlink_to(ROOT / "benchmarks")
        env["PYTHONPATH"] = shim
        return _pytest(line, venv, env, pytest_args)


def _pytest(line: str, venv: Path, env: dict[str, str], pytest_args: list[str]) -> bool:
    started = time.monotonic()
    result = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-P",
            "-m",
            "pytest",
            "--import-mode=importlib",
            "-p",
            "no:cacheprovider",
            "-q",
            # on AKO_TEST_WORKERS workers (2 unless set, as the main run): the Airflow deployment's browser checks
            # on one worker, the line's smoke and the unit tests on the other (tests/conftest.py groups them)
            *(["-n", workers] if (workers := os.environ.get("AKO_TEST_WORKERS", "2")) != "1" else []),
            "tests/unit",
            *LINE_TESTS,
            *pytest_args,
        ],
        cwd=ROOT,
        env=env,
    )
    print(
        f"airflow-matrix: Airflow {line}: {'passed' if result.returncode == 0 else 'FAILED'} "
        f"in {time.monotonic() - started:.0f}s",
        flush=True,
    )
    return result.returncode == 0


def table(records: dict[str, dict]) -> str:
    """Feature x Airflow line, from each line's record (its features as found, its smoke's outcomes)."""
    from airflow_kafka_offsets.airflow_features import AIRFLOW_LINES, FEATURES

    lines = [line for line in AIRFLOW_LINES if line in records]
    head = [
        "| feature | " + " | ".join(f"Airflow {line} ({records[line]['airflow']})" for line in lines) + " |",
        "| --- |" + " --- |" * len(lines),
    ]
    rows = [
        f"| {f.title} | "
        + " | ".join("yes" if records[line]["features"][f.name] else f"no (needs {f.since})" for line in lines)
        + " |"
        for f in FEATURES
    ]
    smoke = [
        "| smoke: "
        + name.removeprefix("test_").replace("_", " ")
        + " | "
        + " | ".join(records[line]["smoke"].get(name, "not run") for line in lines)
        + " |"
        for name in sorted({n for line in lines for n in records[line]["smoke"]})
    ]
    return "\n".join([*head, *rows, *smoke])


def update_docs() -> None:
    records = {path.stem: json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))}
    text = DOC.read_text()
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    DOC.write_text(f"{before}{START}\n{table(records)}\n{END}{after}")
    print(f"airflow-matrix: {DOC.relative_to(ROOT)} updated from {', '.join(sorted(records))}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default=",".join(OLDER_LINES))
    parser.add_argument("--build-only", action="store_true", help="only build the venvs")
    parser.add_argument("--update-docs", action="store_true", help="only write docs/airflow.md's table")
    args, pytest_args = parser.parse_known_args()
    if args.update_docs:
        update_docs()
        return 0
    lines = [line for line in args.lines.split(",") if line]
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))
        venvs = {line: ensure_venv(line, wheel) for line in lines}
        if args.build_only:
            return 0
        failed = [line for line in lines if not test_line(line, venvs[line], pytest_args)]
    if failed:
        print(f"airflow-matrix: FAILED on Airflow {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
