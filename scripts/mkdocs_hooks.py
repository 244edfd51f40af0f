"""MkDocs hook: pages show the README's generated blocks without a second copy to keep in step.

``scripts/spark-matrix`` and ``scripts/bench --update-readme`` rewrite the README between their
markers (``<!-- spark-matrix:start -->`` ... ``end``, ``<!-- benchmarks:summary:start -->`` ...
``end``). A page line ``<!-- readme-block: spark-matrix -->`` is replaced by what the README holds
between that block's markers when the site is built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = {
    "spark-matrix": ("<!-- spark-matrix:start -->", "<!-- spark-matrix:end -->"),
    "benchmarks-summary": ("<!-- benchmarks:summary:start -->", "<!-- benchmarks:summary:end -->"),
}
PLACEHOLDER = re.compile(r"^<!-- readme-block: (?P<name>[\w-]+) -->$", re.M)


def readme_block(name: str, readme: str | None = None) -> str:
    """The README's text between the markers of block ``name`` (without the markers)."""
    text = README.read_text() if readme is None else readme
    start, end = BLOCKS[name]
    return text[text.index(start) + len(start) : text.index(end)].strip("\n")


def include_readme_blocks(markdown: str, readme: str | None = None) -> str:
    return PLACEHOLDER.sub(lambda m: readme_block(m["name"], readme), markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return include_readme_blocks(markdown)
