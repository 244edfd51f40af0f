"""What the installed Apache Airflow can do, found by probing it (imports, attributes), not by its version.

The package installs on Airflow 3.1, 3.2 and 3.3. A feature that rides on something a line lacks is off
there: its example DAG is not defined, and using it explicitly raises
:class:`~airflow_kafka_offsets.errors.AirflowFeatureUnavailableError` naming the Airflow release it
needs. ``python -m airflow_kafka_offsets.airflow_features`` prints what this Airflow has, as JSON.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from airflow_kafka_offsets.errors import AirflowFeatureUnavailableError

# The Airflow lines the package supports, oldest first (each tested: docs/airflow.md).
AIRFLOW_LINES = ("3.1", "3.2", "3.3")


def _has(module: str, *names: str) -> Callable[[], bool]:
    """A probe: ``module`` imports and has every one of ``names``."""

    def probe() -> bool:
        found = _module_or_none(module)
        return found is not None and all(hasattr(found, name) for name in names)

    return probe


def _provider_cli() -> bool:
    """Airflow's CLI adds the commands providers list under ``get_provider_info()["cli"]``."""
    from airflow.providers_manager import ProvidersManager

    return hasattr(ProvidersManager, "cli_command_functions")


def _partitioned_events() -> bool:
    """Tasks can emit partitioned asset events and DAGs be scheduled on them (3.2 has the timetable only)."""
    context = _module_or_none("airflow.sdk.execution_time.context")
    accessor = getattr(context, "OutletEventAccessor", None)
    return _has("airflow.sdk", "PartitionedAssetTimetable")() and hasattr(accessor, "add_partitions")


def _dag_takes(parameter: str) -> Callable[[], bool]:
    def probe() -> bool:
        from airflow.sdk import DAG

        return parameter in inspect.signature(DAG).parameters

    return probe


@dataclass(frozen=True)
class Feature:
    """One capability of the package that needs something of Airflow; ``since`` is the first line with it."""

    name: str
    title: str
    since: str
    probe: Callable[[], bool]


FEATURES: tuple[Feature, ...] = (
    Feature(
        "approvals",
        "Approvals of manual operations in Required actions (human-in-the-loop)",
        "3.1",
        _has("airflow.providers.standard.operators.hitl", "ApprovalOperator"),
    ),
    Feature(
        "deadline_alerts",
        "Freshness deadline (`freshness_deadline`, Deadline Alerts)",
        "3.1",
        _has("airflow.sdk.definitions.deadline", "DeadlineAlert", "DeadlineReference"),
    ),
    Feature(
        "pipelines_page",
        "The Kafka pipelines page (UI plugin: `fastapi_apps`, `external_views`)",
        "3.1",
        _has("airflow.api_fastapi.core_api.security", "requires_access_dag"),
    ),
    Feature(
        "partitioned_assets",
        "One run per batch (partitioned asset events, `PartitionedAssetTimetable`)",
        "3.3",
        _partitioned_events,
    ),
    Feature(
        "provider_cli",
        "`airflow kafka-offsets` in Airflow's CLI (`airflow-kafka-offsets` works on every line)",
        "3.2",
        _provider_cli,
    ),
    Feature(
        "dag_run_types",
        "Backfills refused by the DAG (`allowed_run_types`; the plan step refuses them on every line)",
        "3.2",
        _dag_takes("allowed_run_types"),
    ),
    Feature(
        "deadline_variable_interval",
        "A deadline read from a Variable when a run starts (`VariableInterval`)",
        "3.3",
        _has("airflow.sdk.definitions.deadline", "VariableInterval"),
    ),
)
BY_NAME = {feature.name: feature for feature in FEATURES}


def airflow_version() -> str:
    return version("apache-airflow")


def airflow_line() -> str:
    """The installed Airflow's line, e.g. ``3.1`` (one of ``AIRFLOW_LINES`` where supported)."""
    return ".".join(airflow_version().split(".")[:2])


@functools.cache
def available(name: str) -> bool:
    """Whether this Airflow has what feature ``name`` needs (probed once per process)."""
    return BY_NAME[name].probe()


def require(name: str) -> None:
    """Raise :class:`AirflowFeatureUnavailableError` when this Airflow lacks feature ``name``."""
    if not available(name):
        feature = BY_NAME[name]
        raise AirflowFeatureUnavailableError(feature.title, feature.since, airflow_version())


def detected() -> dict[str, bool]:
    """Every feature, probed here."""
    return {feature.name: available(feature.name) for feature in FEATURES}


def declared(line: str) -> dict[str, bool]:
    """Every feature as the package declares it for an Airflow line (``"3.1"``)."""
    key = tuple(int(part) for part in line.split("."))
    return {feature.name: key >= tuple(int(part) for part in feature.since.split(".")) for feature in FEATURES}


def allowed_run_types(*run_types: str) -> dict[str, Any]:
    """``DAG(..., **allowed_run_types("scheduled", "manual"))``: the DAG accepts only these run types where
    Airflow can say so (3.2 and later); elsewhere nothing, and the plan step still refuses backfills."""
    return {"allowed_run_types": list(run_types)} if available("dag_run_types") else {}


def airflow_exception(name: str) -> type[Exception]:
    """Airflow's exception class ``name``: in ``airflow.sdk.exceptions`` from 3.2 on, ``airflow.exceptions`` in
    3.1."""
    for module in ("airflow.sdk.exceptions", "airflow.exceptions"):
        found = getattr(_module_or_none(module), name, None)
        if isinstance(found, type) and issubclass(found, Exception):
            return found
    raise ImportError(f"Airflow has no exception {name}")


def _module_or_none(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


if __name__ == "__main__":
    print(json.dumps({"airflow": airflow_version(), "features": detected()}, indent=2))
