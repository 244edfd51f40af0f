"""Options declared once: a frozen dataclass whose fields carry what every surface needs.

A field made with :func:`option` names its operator keyword argument (the task group's key), its
default, the sentence the docs' option table shows, whether Airflow renders it as a template, and,
where a command line or the manual operations' form takes it, its flag and its form label. The
operators' keyword arguments and ``template_fields``, the task group's keys, the CLI's flags, the
change-spec form and the docs' tables are all read from these fields (:func:`declared`), so a new
option is one field plus the code that uses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

_LINK = re.compile(r"\[([^]]+)\]\([^)]+\)")


@dataclass(frozen=True)
class OptionInfo:
    """What one declared option tells the surfaces that take it."""

    name: str  # the operator's keyword argument, the task group's key
    attribute: str  # the dataclass field holding its value
    default: Any
    doc: str  # the meaning column of the docs' table (Markdown)
    default_doc: str  # the default column of the docs' table
    templated: bool
    cli: str | None = None  # its command-line flag, where a command takes it
    cli_type: Callable[[str], Any] | None = None  # argparse's type for the flag
    form: tuple[str, str] | None = None  # the change-spec form's label and help, where the form takes it
    choices: tuple[str, ...] = ()  # the values it accepts, when they are a fixed list


def option(
    default: Any,
    doc: str,
    *,
    param: str | None = None,
    templated: bool = True,
    default_doc: str | None = None,
    cli: str | None = None,
    cli_type: Callable[[str], Any] | None = None,
    form: tuple[str, str] | None = None,
    choices: Iterable[str] = (),
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A dataclass field declaring an option (``param``: its keyword argument when not the field's name;
    ``factory``: for a mutable default, which operators then see as None)."""
    meta = {
        "param": param,
        "default": None if factory else default,
        "doc": doc,
        "templated": templated,
        "default_doc": default_doc,
        "cli": cli,
        "cli_type": cli_type,
        "form": form,
        "choices": tuple(choices),
    }
    if factory is not None:
        return field(default_factory=factory, metadata={"option": meta})
    return field(default=default, metadata={"option": meta})


def declared(cls: type) -> tuple[OptionInfo, ...]:
    """The options a dataclass declares, in their order."""
    infos = []
    for f in fields(cls):
        meta = f.metadata["option"]
        default = meta["default"]
        infos.append(
            OptionInfo(
                name=meta["param"] or f.name,
                attribute=f.name,
                default=default,
                doc=meta["doc"],
                default_doc=meta["default_doc"] if meta["default_doc"] is not None else _shown(default),
                templated=meta["templated"],
                cli=meta["cli"],
                cli_type=meta["cli_type"],
                form=meta["form"],
                choices=meta["choices"],
            )
        )
    return tuple(infos)


def option_names(cls: type) -> tuple[str, ...]:
    return tuple(o.name for o in declared(cls))


def templated_names(cls: type) -> tuple[str, ...]:
    """The options Airflow renders: the operators' ``template_fields`` that come from ``cls``."""
    return tuple(o.name for o in declared(cls) if o.templated)


def given_options(cls: type, source: object) -> dict[str, Any]:
    """``cls``'s options held by ``source`` under their keyword names (an operator, parsed arguments), by
    field name; one missing from ``source`` is left out."""
    return {o.attribute: getattr(source, o.name) for o in declared(cls) if hasattr(source, o.name)}


def _shown(value: Any) -> str:
    """A default as the docs' table shows it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{getattr(value, 'value', value)}`"


def plain(doc: str) -> str:
    """An option's doc without Markdown, for ``--help``: code spans unquoted, links as their text."""
    return _LINK.sub(r"\1", doc).replace("`", "")


def option_table(*declarations: type, heading: str = "option", skip: Iterable[str] = ()) -> str:
    """The docs' Markdown table of the options of ``declarations`` (``skip``: options documented elsewhere)."""
    rows = [f"| {heading} | default | meaning |", "|---|---|---|"]
    rows += [
        f"| `{o.name}` | {o.default_doc} | {o.doc} |"
        for cls in declarations
        for o in declared(cls)
        if o.name not in set(skip)
    ]
    return "\n".join(rows)
