"""Parsing the values users type: operator arguments, rendered templates, form fields, CLI options.

Templated values arrive as strings ("" or "None" when unset), so every integer goes through
one parser with one wording of its errors.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from airflow_kafka_offsets.errors import InvalidPipelineSpecError

UNSET_TEXTS = frozenset({"", "None", "null"})
TRUE_WORDS = frozenset({"true", "yes", "1"})
FALSE_WORDS = frozenset({"false", "no", "0"})
E = TypeVar("E", bound=Enum)


def is_unset(value: object) -> bool:
    """None, or a blank or rendered-None string."""
    return value is None or (isinstance(value, str) and value.strip() in UNSET_TEXTS)


def optional_int(value: object, what: str, *, minimum: int | None = None) -> int | None:
    """A whole number (``minimum`` or more), or None when unset; anything else names ``what``."""
    if is_unset(value):
        return None
    if minimum == 1:
        expected = "a positive integer"
    elif minimum == 0:
        expected = "a non-negative integer"
    else:
        expected = "a whole number" + (f" of at least {minimum}" if minimum is not None else "")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidPipelineSpecError(f"{what} must be {expected}, got {value!r}")
    text = str(value).strip()
    if not text.lstrip("+-").isdigit():
        raise InvalidPipelineSpecError(f"{what} must be {expected}, got {value!r}")
    number = int(text)
    if minimum is not None and number < minimum:
        raise InvalidPipelineSpecError(f"{what} must be {expected}, got {value!r}")
    return number


def optional_bool(value: object, what: str, *, default: bool) -> bool:
    """True or False (or their words, as templates render them); ``default`` when unset."""
    if isinstance(value, bool):
        return value
    if is_unset(value):
        return default
    word = str(value).strip().lower() if isinstance(value, str) else ""
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise InvalidPipelineSpecError(f"{what} must be true or false, got {value!r}")


def enum_value(enum_type: type[E], value: object, what: str) -> E:
    """A member of ``enum_type`` by its value; the error lists the allowed values."""
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in enum_type)
        raise InvalidPipelineSpecError(f"{what} must be one of {allowed}; got {value!r}") from None
