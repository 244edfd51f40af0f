"""The form Airflow's UI draws for one of the provider's connection types.

Declared in the provider info (``get_provider_info()["connection-types"]``: ``conn-fields`` with JSON
schema and ``ui-field-behaviour``), so that Airflow 3.2 and later draw it without importing the hook.
The S3 and schema registry types share this shape; only their fields and labels differ.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.errors import ConfigurationError


def text_field(label: str, description: str, *, secret: bool = False) -> dict[str, Any]:
    """An optional text field of the connection's extra; a secret one is masked in the form."""
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if secret:
        schema["format"] = "password"
    return {"label": label, "description": description, "schema": schema}


def extra_text(extra: Mapping[str, Any], key: str, connection: str) -> str | None:
    """A text field of a connection's extra (None when empty); ``connection`` names the connection in the
    ``ConfigurationError`` that refuses a value that is not text."""
    value = extra.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigurationError(f"{connection} has a {key} that is not text")
    return value.strip() or None


def extra_seconds(extra: Mapping[str, Any], key: str, default: float, connection: str) -> float:
    """A number of seconds above 0 in a connection's extra (``default`` when empty); ``connection`` names
    the connection in the ``ConfigurationError`` that refuses anything else."""
    value = extra.get(key)
    if value is None or str(value).strip() == "":
        return default
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigurationError(f"{connection} has {key} {value!r}: give a number of seconds above 0")
    return seconds


def extra_object(extra: Mapping[str, Any], key: str, connection: str) -> dict[str, Any]:
    """A JSON object in a connection's extra, given as an object or as its JSON text (what a form field
    stores); empty when not given."""
    value: Any = extra.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ConfigurationError(f"{connection} has {key} that is not JSON: give an object") from exc
    value = value or {}
    if not isinstance(value, dict):
        raise ConfigurationError(f"{connection} has {key} that is not a JSON object")
    return {str(k): v for k, v in value.items()}


@dataclass(frozen=True)
class ConnectionForm:
    """One connection type: its hook, the standard fields it hides or relabels, and its own fields."""

    conn_type: str
    hook_class: str
    hook_name: str
    hidden_fields: tuple[str, ...]
    relabeling: Mapping[str, str]
    placeholders: Mapping[str, str]
    fields: Mapping[str, Mapping[str, Any]]

    def provider_entry(self) -> dict[str, Any]:
        """The ``connection-types`` entry of the provider info."""
        return {
            "connection-type": self.conn_type,
            "hook-class-name": self.hook_class,
            "hook-name": self.hook_name,
            "ui-field-behaviour": {
                "hidden-fields": list(self.hidden_fields),
                "relabeling": dict(self.relabeling),
                "placeholders": dict(self.placeholders),
            },
            "conn-fields": self.fields,
        }
