"""The benchmarks and the dev scripts (scripts/devstack, scripts/faults_harness) still import, and so
does every name they import from this repository, including the imports inside functions (the
benchmarks import the package lazily, once their environment is set): a renamed or removed name
fails here rather than at the next benchmark run. (Attributes used at run time are mypy's: see
[tool.mypy] files.)"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# module name -> source file; scripts/ is on sys.path (pytest's pythonpath), the repository root too
MODULES = {
    ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
    for root, directory in ((REPO, "benchmarks"), (REPO / "scripts", "devstack"), (REPO / "scripts", "faults_harness"))
    for path in sorted((root / directory).glob("*.py"))
}
FIRST_PARTY = ("airflow_kafka_offsets", "benchmarks", "devstack", "faults_harness")


def test_every_module_is_listed() -> None:
    assert {"benchmarks.run", "benchmarks.table_commits", "devstack.__main__", "faults_harness.trial"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_imports(name: str) -> None:
    importlib.import_module(name)


def imported_names(name: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every first-party import in a module, at any depth."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{module}" if module else base
            found += [(node.lineno, module, alias.name) for alias in node.names]
    return [(line, m, n) for line, m, n in found if m.split(".")[0] in FIRST_PARTY]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_first_party_names_it_imports_exist(name: str) -> None:
    missing = []
    for line, module, attribute in imported_names(name):
        try:
            imported = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"line {line}: {module}: {exc}")
            continue
        if attribute is None or hasattr(imported, attribute):
            continue
        try:  # `from package import submodule`
            importlib.import_module(f"{module}.{attribute}")
        except ModuleNotFoundError:
            missing.append(f"line {line}: {module} has no {attribute}")
    assert not missing, f"{MODULES[name]}:\n" + "\n".join(missing)


def test_a_removed_name_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What this file is for: a lazy import of a name the package no longer has."""
    monkeypatch.setitem(MODULES, "benchmarks.rotten", tmp_path / "rotten.py")
    (tmp_path / "rotten.py").write_text(
        "def plans():\n    from airflow_kafka_offsets.ledger.store import ATTEMPT_COLUMNS\n    return ATTEMPT_COLUMNS\n"
    )
    with pytest.raises(AssertionError, match=r"line 2: airflow_kafka_offsets.ledger.store has no ATTEMPT_COLUMNS"):
        test_first_party_names_it_imports_exist("benchmarks.rotten")


def test_the_timed_app_wraps_steps_the_spark_app_still_has() -> None:
    """benchmarks/timed_app.py wraps the app's steps by name at run time (no import names them): wrap them
    in a process of its own (the wrappers replace pyspark's and the app's functions there)."""
    script = "import benchmarks.timed_app as timed_app; timed_app.package_app(); print('wrapped')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "scripts")])}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("wrapped"), result.stderr[-2000:]
