"""The crash-point registry: every point in the code is registered, and misspelt ones are refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from airflow_kafka_offsets.service import faults

PACKAGE = Path(faults.__file__).resolve().parents[1]


def points_in_code() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "crash_point"
            ):
                assert isinstance(node.args[0], ast.Constant), f"{path}: crash points are named by literals"
                found.add(node.args[0].value)
    return found


def test_every_registered_point_is_in_the_code_and_back() -> None:
    assert points_in_code() == set(faults.CRASH_POINTS)


def test_unknown_point_is_refused() -> None:
    with pytest.raises(faults.UnknownCrashPointError, match="'after_lunch' is not registered"):
        faults.crash_point("after_lunch")


def test_misspelt_point_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.CRASH_ENV, "after_publsh")
    with pytest.raises(faults.UnknownCrashPointError, match="after_publsh"):
        faults.check_crash_env()
    monkeypatch.setenv(faults.CRASH_ENV, "after_publish")
    faults.check_crash_env()


def test_observers_see_each_point(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(faults, "_observers", [])
    monkeypatch.delenv(faults.CRASH_ENV, raising=False)
    faults.add_observer(seen.append)
    faults.crash_point("after_plan")
    faults.crash_point("after_commit")
    assert seen == ["after_plan", "after_commit"]
