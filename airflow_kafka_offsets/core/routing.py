"""Routing of one pipeline's records to many tables: by topic, or by a header's value.

Pure: validation of what users type into :class:`TableRoutes`, the rule a record follows
(:meth:`TableRoutes.table_for`, which the Spark app computes the same way in SQL) and the check
that a spec change only adds routes. No I/O, so every rule is tested by the dozen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.errors import InvalidPipelineSpecError

# One namespace level and a table name, each a safe identifier (they end up in paths and catalog rows).
TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127})?")
PLACEHOLDER = re.compile(r"\{header:([^{}]+)\}")
# What a record that has no route does: its batch fails ("refuse"), or it goes to the errors output.
UNKNOWN_POLICIES = ("errors", "refuse")


def check_table_name(pipeline: str, table: str, *, namespace: bool, what: str = "table") -> str:
    """A table name users gave, or a clear refusal naming it."""
    if not isinstance(table, str) or not TABLE_NAME.fullmatch(table):
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: {what} {table!r} is not a table name such as 'analytics.events' "
            "(an optional namespace and a name of letters, digits and '_')"
        )
    if namespace and "." not in table:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: {what} {table!r} needs a namespace for Iceberg, as in 'analytics.{table}'"
        )
    return table


@dataclass(frozen=True)
class HeaderRoute:
    """Records go to ``prefix + <value of header> + suffix`` when that table is in ``allow``.

    ``unknown``: what a record whose table is not allowed (or that lacks the header) does:
    ``"errors"`` (it goes to the batch's errors output with its offsets), ``"refuse"`` (its batch
    fails and nothing is committed), or a fallback table that takes it.
    """

    header: str
    prefix: str
    suffix: str
    allow: tuple[str, ...]
    unknown: str = "errors"

    @property
    def pattern(self) -> str:
        return f"{self.prefix}{{header:{self.header}}}{self.suffix}"

    @property
    def fallback(self) -> str | None:
        return None if self.unknown in UNKNOWN_POLICIES else self.unknown

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "allow": list(self.allow), "unknown": self.unknown}


@dataclass(frozen=True)
class TableRoutes:
    """Which table each record of a pipeline lands in: ``topics`` maps topics to tables; records of the
    other topics follow ``header`` (every topic is covered by one or the other)."""

    topics: tuple[tuple[str, str], ...] = ()
    header: HeaderRoute | None = None

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table a record can land in, sorted."""
        names = {table for _, table in self.topics}
        if self.header is not None:
            names.update(self.header.allow)
            names.update([self.header.fallback] if self.header.fallback else [])
        return tuple(sorted(names))

    def table_for(self, topic: str, header_value: str | None) -> str | None:
        """The table of a record, or None when it has no route (the Spark app's SQL does the same)."""
        mapped = dict(self.topics).get(topic)
        if mapped is not None or self.header is None:
            return mapped
        route = self.header
        if header_value is not None:
            table = f"{route.prefix}{header_value}{route.suffix}"
            if table in route.allow:
                return table
        return route.fallback

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tables": dict(self.topics)}
        return data | ({"route": self.header.to_json()} if self.header else {})

    def job_json(self) -> dict[str, Any]:
        """What the Spark app needs to route (the job file's ``routing``)."""
        route = self.header
        return {
            "topics": dict(self.topics),
            "header": route.header if route else None,
            "prefix": route.prefix if route else "",
            "suffix": route.suffix if route else "",
            "allow": list(route.allow) if route else [],
            "fallback": route.fallback if route else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TableRoutes:
        route = data.get("route")
        header = None
        if route:
            found = PLACEHOLDER.search(route["pattern"])
            assert found is not None  # stored specs were validated by build_routes
            header = HeaderRoute(
                found.group(1),
                route["pattern"][: found.start()],
                route["pattern"][found.end() :],
                tuple(route["allow"]),
                route.get("unknown", "errors"),
            )
        return cls(tuple(sorted((data.get("tables") or {}).items())), header)


def _header_route(pipeline: str, route: Any, namespace: bool) -> HeaderRoute:
    if not isinstance(route, Mapping):
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: route must be a mapping such as "
            '{"pattern": "ns.{header:table}", "allow": ["ns.a"], "unknown": "errors"}'
        )
    unknown_options = set(route) - {"header", "pattern", "allow", "unknown"}
    if unknown_options:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: unknown route option(s) {', '.join(sorted(unknown_options))}; "
            "a route takes pattern, allow, unknown and (optionally) header"
        )
    pattern = route.get("pattern")
    if not isinstance(pattern, str):
        pattern = ""
    placeholders = PLACEHOLDER.findall(pattern)
    if len(placeholders) != 1:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: route pattern {pattern!r} must hold exactly one '{{header:<name>}}', "
            "as in 'ns.{header:table}'"
        )
    header = placeholders[0]
    if route.get("header") not in (None, header):
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: route header {route.get('header')!r} differs from the pattern's {header!r}"
        )
    found = PLACEHOLDER.search(pattern)
    assert found is not None
    prefix, suffix = pattern[: found.start()], pattern[found.end() :]
    allow = route.get("allow")
    if not isinstance(allow, Sequence) or isinstance(allow, str) or not allow:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: a header route needs allow, the list of tables its records may land in "
            "(a header's value names a table only if it is listed)"
        )
    for table in allow:
        check_table_name(pipeline, table, namespace=namespace, what="allowed table")
        if not (table.startswith(prefix) and table.endswith(suffix) and len(table) > len(prefix) + len(suffix)):
            raise InvalidPipelineSpecError(
                f"pipeline {pipeline!r}: allowed table {table!r} does not match the route pattern {pattern!r}"
            )
    _refuse_duplicates(pipeline, list(allow), "route allow")
    unknown = route.get("unknown", "errors")
    if not isinstance(unknown, str) or not unknown:
        raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: route unknown must be 'errors', 'refuse' or a table")
    if unknown not in UNKNOWN_POLICIES:
        check_table_name(pipeline, unknown, namespace=namespace, what="fallback table (route unknown)")
    return HeaderRoute(header, prefix, suffix, tuple(allow), unknown)


def _refuse_duplicates(pipeline: str, tables: list[str], where: str) -> None:
    """Two names of one table (the same, or the same but for case: one path on case-insensitive storage)."""
    seen: dict[str, str] = {}
    for table in tables:
        other = seen.get(table.lower())
        if other == table:
            raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: {where} names table {table!r} twice")
        if other is not None:
            raise InvalidPipelineSpecError(
                f"pipeline {pipeline!r}: {where} names tables {other!r} and {table!r}, which differ only in case"
            )
        seen[table.lower()] = table


def build_routes(pipeline: str, tables: Any, route: Any, topics: Sequence[str], *, namespace: bool) -> TableRoutes:
    """Validate ``tables`` (topic -> table) and ``route`` (a header route) against the pipeline's topics."""
    if tables is None:
        tables = {}
    if not isinstance(tables, Mapping):
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: tables must map each topic to its table, as in {{'orders': 'ns.orders'}}"
        )
    for topic, table in tables.items():
        if topic not in topics:
            raise InvalidPipelineSpecError(
                f"pipeline {pipeline!r}: tables routes topic {topic!r}, which the pipeline does not read "
                f"(its topics: {', '.join(topics)})"
            )
        check_table_name(pipeline, table, namespace=namespace, what=f"the table of topic {topic!r}")
    header = _header_route(pipeline, route, namespace) if route else None
    unrouted = [t for t in topics if t not in tables]
    if unrouted and header is None:
        raise InvalidPipelineSpecError(
            f"pipeline {pipeline!r}: topic(s) {', '.join(unrouted)} have no table: add them to tables, or give a "
            "route by header"
        )
    if not tables and header is None:
        raise InvalidPipelineSpecError(f"pipeline {pipeline!r}: tables and route are both empty")
    routes = TableRoutes(tuple(sorted(tables.items())), header)
    _refuse_duplicates(pipeline, list(routes.tables), "the sink")  # case clashes across topics and allow
    return routes


def rerouting_problems(
    stored: TableRoutes | None, wanted: TableRoutes | None, committed_topics: Sequence[str]
) -> list[str]:
    """Why ``wanted`` is not ``stored`` plus new routes: a topic with committed data keeps its table,
    an allowed table stays allowed, the header and the policy for unknown values stay."""
    if stored is None or wanted is None:
        return [] if stored == wanted else ["a pipeline's tables cannot be switched on or off by a spec change"]
    problems = []
    wanted_topics = dict(wanted.topics)
    for topic, table in stored.topics:
        if topic in committed_topics and wanted_topics.get(topic) != table:
            problems.append(
                f"topic {topic!r} has committed data in {table!r}; it cannot be rerouted to "
                f"{wanted_topics.get(topic) or 'the header route'}"
            )
    if stored.header is not None:
        new = wanted.header
        if new is None or (new.header, new.prefix, new.suffix, new.unknown) != (
            stored.header.header,
            stored.header.prefix,
            stored.header.suffix,
            stored.header.unknown,
        ):
            problems.append(f"the header route {stored.header.pattern!r} can only gain allowed tables")
        elif set(stored.header.allow) - set(new.allow):
            removed = ", ".join(sorted(set(stored.header.allow) - set(new.allow)))
            problems.append(f"allowed table(s) {removed} cannot be removed from the header route")
    return problems
