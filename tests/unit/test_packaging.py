"""The wheel ships every package: `pip install` alone must be enough to run a DAG."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def source_packages() -> set[str]:
    """Every directory of the package tree with an ``__init__.py``, as a dotted name."""
    tree = ROOT / "airflow_kafka_offsets"
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in tree.rglob("__init__.py")}
    return found | {"airflow_kafka_offsets.spark_apps"}  # spark_apps/ ships under the package's name


def test_every_package_of_the_tree_is_in_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    assert source_packages() - listed == set(), "add them to [tool.setuptools] packages in pyproject.toml"
    assert listed - source_packages() == set(), "listed in pyproject.toml but not in the tree"
