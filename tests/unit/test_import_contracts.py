"""The Airflow imports that the contract "airflow-only-lazily" ([tool.importlinter] in pyproject.toml)
lets service and spark make are made inside functions: import-linter sees an import wherever it is,
so this is what keeps them out of module level (importing service or spark loads no Airflow). And
spark's one import of Airflow is the Spark provider's SparkSubmitHook, which the contract
"spark-reads-no-connection" can only let through as ``airflow`` (it names external packages by their
top name)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
LAZY_CONTRACT = "airflow-only-lazily"


def lazy_imports() -> list[tuple[str, str]]:
    (contract,) = [c for c in CONTRACTS if c["id"] == LAZY_CONTRACT]
    pairs = [tuple(part.strip() for part in entry.split("->")) for entry in contract["ignore_imports"]]
    return [(importer, imported) for importer, imported in pairs]


def source_of(module: str) -> Path:
    path = REPO.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def matches(name: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return name.startswith(pattern[:-1])
    return name == pattern or name.startswith(pattern + ".")


def imports_with_scope(path: Path) -> list[tuple[int, str, bool]]:
    """(line, imported module, inside a function) of every import of a file."""
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.lineno, child.module, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


@pytest.mark.parametrize(("importer", "imported"), lazy_imports(), ids=[" -> ".join(p) for p in lazy_imports()])
def test_allowed_airflow_imports_are_inside_functions(importer: str, imported: str) -> None:
    path = source_of(importer)
    hits = [(line, module, lazy) for line, module, lazy in imports_with_scope(path) if matches(module, imported)]
    assert hits, f"{importer} no longer imports {imported}: drop it from {LAZY_CONTRACT}'s ignore_imports"
    at_module_level = [f"{path.relative_to(REPO)}:{line} imports {module}" for line, module, lazy in hits if not lazy]
    assert not at_module_level, "at module level: " + "; ".join(at_module_level)


def test_a_module_level_import_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import airflow.sdk\n\n\ndef f():\n    from airflow.sdk import BaseHook\n")
    assert imports_with_scope(module) == [(1, "airflow.sdk", False), (5, "airflow.sdk", True)]


# What spark/ may import of Airflow: the hook that runs spark-submit (the connection is read by hooks/spark.py).
SPARK_AIRFLOW_IMPORTS = {"airflow.providers.apache.spark.hooks.spark_submit"}


def test_spark_imports_nothing_of_airflow_but_the_spark_submit_hook() -> None:
    spark = REPO / "airflow_kafka_offsets" / "spark"
    found = {
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sorted(spark.glob("*.py"))
        for line, module, _ in imports_with_scope(path)
        if matches(module, "airflow") and module not in SPARK_AIRFLOW_IMPORTS
    }
    assert not found, "spark/ imports Airflow beyond SparkSubmitHook: " + "; ".join(sorted(found))
    (contract,) = [c for c in CONTRACTS if c["id"] == "spark-reads-no-connection"]
    assert contract["ignore_imports"] == ["airflow_kafka_offsets.spark.submit -> airflow"]
