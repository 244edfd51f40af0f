"""Markdown helpers of the benchmark report: numbers as text, tables, medians."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def median_of(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mid = len(present) // 2
    return present[mid] if len(present) % 2 else (present[mid - 1] + present[mid]) / 2


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        if abs(value) >= 1000 and digits <= 1:
            return f"{value:,.0f}"
        return f"{value:,.{digits}f}"
    return str(value)


def table(headers: list[str], rows: list[list[Any]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(headers) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows
    ]
