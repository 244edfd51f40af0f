"""Declared options as an operator's keyword arguments (:mod:`airflow_kafka_offsets.core.options`).

Airflow reads an operator's ``__init__`` signature: ``default_args`` fill the parameters it names,
and ``partial``/``expand`` accept only those. :func:`takes_options` adds each declared option to the
signature as a keyword-only parameter with its default, and stores its value (as given, rendered
later when it is templated) as the attribute of the same name once ``__init__`` has run.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_kafka_offsets.core.options import OptionInfo, declared

Init = TypeVar("Init", bound=Callable[..., None])


def takes_options(*declarations: type, only: tuple[str, ...] | None = None) -> Callable[[Init], Init]:
    """Decorate an operator's ``__init__`` (which ends in ``**kwargs``) to take the options of
    ``declarations`` (``only``: just these of them)."""
    infos = [o for d in declarations for o in declared(d) if only is None or o.name in only]

    def decorate(init: Init) -> Init:
        @functools.wraps(init)
        def __init__(self: Any, **kwargs: Any) -> None:
            values = {o.name: kwargs.pop(o.name, o.default) for o in infos}
            init(self, **kwargs)
            for name, value in values.items():
                setattr(self, name, value)

        __init__.__signature__ = _signature(init, infos)  # type: ignore[attr-defined]
        return __init__  # type: ignore[return-value]

    return decorate


def _signature(init: Callable[..., None], infos: list[OptionInfo]) -> inspect.Signature:
    signature = inspect.signature(init)
    *params, var_kw = signature.parameters.values()
    assert var_kw.kind is inspect.Parameter.VAR_KEYWORD, f"{init.__qualname__} must end in **kwargs"
    added = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default) for o in infos]
    return signature.replace(parameters=[*params, *added, var_kw])
