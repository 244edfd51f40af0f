"""Who did something: the actor the ledger records with every plan, attempt, commit and audit event.

Built at the edges (an Airflow task's context, a shell command) and passed down as a value. The
ledger stores it as a JSON document (``planned_by``, ``committed_by``, ``actor`` columns) of
exactly the keys it was built from: :meth:`Actor.from_json` and :meth:`Actor.to_json` are inverse,
null keys and keys this version does not know included, so stored rows read back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class Actor:
    """An Airflow task try (dag, run, task, try, map index), a shell command (``cli``, ``user``) or
    a manual operation (``operation``), and where it ran (``hostname``, ``pid``). An operation a
    person approved also names them (``approved_by``: the Airflow user's name, ``approved_by_id``)
    and the digest of the dry run they approved (``approved_digest``)."""

    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None
    map_index: int | None = None
    operation: str | None = None
    approved_by: str | None = None
    approved_by_id: str | None = None
    approved_digest: str | None = None
    cli: str | None = None
    user: str | None = None
    hostname: str | None = None
    pid: int | None = None
    nulls: frozenset[str] = frozenset()
    """Keys stored as null rather than left out (a task's actor names every key of its task instance)."""
    other: tuple[tuple[str, Any], ...] = field(default=(), hash=False)
    """Keys this version does not know (older rows, tests), kept as stored."""

    @classmethod
    def from_json(cls, document: Mapping[str, Any] | None) -> Actor:
        """An actor from its document: as stored in the ledger, or as an edge builds it."""
        document = document or {}
        known = {f.name for f in fields(cls)} - {"nulls", "other"}
        return cls(
            **{k: v for k, v in document.items() if k in known and v is not None},
            nulls=frozenset(k for k, v in document.items() if k in known and v is None),
            other=tuple((k, v) for k, v in document.items() if k not in known),
        )

    def to_json(self) -> dict[str, Any]:
        """The document the ledger stores: set keys, null keys and unknown keys, in key order."""
        document = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("nulls", "other") and (getattr(self, f.name) is not None or f.name in self.nulls)
        }
        document.update(self.other)
        return dict(sorted(document.items()))

    def describe(self) -> str:
        """'run R (dag D, task T, try N, approved by P)' for log lines that name who did something."""
        details = [
            f"{label} {value}"
            for label, value in (
                ("dag", self.dag_id),
                ("task", self.task_id),
                ("try", self.try_number),
                ("approved by", self.approved_by),
            )
            if value is not None
        ]
        return f"run {self.run_id}" + (f" ({', '.join(details)})" if details else "")


def describe_actor(actor: Actor | None) -> str:
    """:meth:`Actor.describe`, 'run None' for no actor."""
    return (actor or Actor()).describe()


def with_approval(actor: Actor, digest: str, approved_by: Mapping[str, Any] | str | None) -> Actor:
    """``actor`` as it applies a dry run a person approved: with the digest approved and who approved
    it, from Airflow's ``responded_by_user`` (``{"id": ..., "name": ...}``) or a name."""
    if isinstance(approved_by, Mapping):
        name, user_id = approved_by.get("name"), approved_by.get("id")
        by, by_id = (None if name is None else str(name)), (None if user_id is None else str(user_id))
    else:
        by, by_id = approved_by or None, None
    return replace(actor, approved_digest=digest, approved_by=by, approved_by_id=by_id)
