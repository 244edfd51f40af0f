"""The Spark options a task or a command is given, as one value: the read operator, the manual
operations operator and the CLI take the same ones (and the plan operator the connection and the
connector, to check them before planning).

Each field names its operator parameter (``spark_conf`` for ``conf``) and its CLI option, so the
operators' attributes, the CLI's parsed arguments and the task group's ``spark_kwargs`` all turn
into a :class:`SparkJobOptions` the same way (:meth:`SparkJobOptions.from_params`). The
``[kafka_offsets]`` defaults and S3 settings are added where the options become
:class:`~airflow_kafka_offsets.spark.settings.SparkSettings` (:mod:`airflow_kafka_offsets.runtime`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_offsets.core.defaults import DEFAULT_SPARK_CONN_ID
from airflow_kafka_offsets.core.options import declared, option, option_names, plain, templated_names
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.object_storage.access import S3Access
from airflow_kafka_offsets.spark.settings import SparkSettings, split_list


def conf_item(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the CLI's ``--spark-conf``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. spark.sql.shuffle.partitions=8; got {text!r}")
    return key.strip(), value


@dataclass(frozen=True)
class SparkJobOptions:
    """Where a task's Spark jobs run and with what: the Spark connection, extra conf, the Kafka
    connector (jars or packages) and spark-submit's resource options (refused on Spark Connect)."""

    conn_id: str = option(
        DEFAULT_SPARK_CONN_ID,
        "Airflow connection of Spark: spark (spark-submit) or spark_connect",
        param="spark_conn_id",
        cli="--spark-conn-id",
    )
    conf: Mapping[str, str] = option(
        None,
        "extra Spark settings (`--conf` for spark-submit, session conf on Spark Connect)",
        param="spark_conf",
        cli="--spark-conf",
        cli_type=conf_item,
        factory=dict,
    )
    jars: tuple[str, ...] = option(
        None,
        "the Kafka connector's jars, comma-separated or a list",
        param="spark_jars",
        default_doc="`[kafka_offsets] spark_jars`",
        cli="--spark-jars",
        factory=tuple,
    )
    packages: tuple[str, ...] = option(
        None,
        "Maven coordinates of the connector instead, comma-separated or a list",
        param="spark_packages",
        default_doc="`[kafka_offsets] spark_packages`, else the connector of the Spark that runs the batch "
        "(see [Spark versions](spark.md))",
        cli="--spark-packages",
        factory=tuple,
    )
    executor_cores: int | None = option(
        None, "spark-submit's `--executor-cores`", templated=False, cli="--executor-cores", cli_type=int
    )
    executor_memory: str | None = option(
        None, "spark-submit's `--executor-memory`", templated=False, cli="--executor-memory"
    )
    driver_memory: str | None = option(None, "spark-submit's `--driver-memory`", templated=False, cli="--driver-memory")
    num_executors: int | None = option(
        None, "spark-submit's `--num-executors`", templated=False, cli="--num-executors", cli_type=int
    )
    total_executor_cores: int | None = option(
        None,
        "spark-submit's `--total-executor-cores`",
        templated=False,
        cli="--total-executor-cores",
        cli_type=int,
    )

    @classmethod
    def from_params(cls, source: object) -> SparkJobOptions:
        """The options from an object holding them under their parameter names (an operator, the CLI's
        parsed arguments); a missing or None one is the default. ``spark_conf`` may be a mapping or
        ``KEY=VALUE`` items; jars and packages a comma-separated string or a list."""
        values = {o.attribute: getattr(source, o.name, None) for o in declared(cls)}
        return cls(
            conn_id=values["conn_id"] or DEFAULT_SPARK_CONN_ID,
            conf=_conf(values["conf"]),
            jars=split_list(values["jars"]),
            packages=split_list(values["packages"]),
            **{name: values[name] for name in RESOURCES},
        )

    def connector(self) -> SparkJobOptions:
        """Only where Spark runs and its Kafka connector: what the plan step checks before planning."""
        return SparkJobOptions(self.conn_id, jars=self.jars, packages=self.packages)

    def settings(
        self,
        *,
        default_jars: tuple[str, ...] = (),
        default_packages: tuple[str, ...] = (),
        storage: S3Access | None = None,
        private_conf: Mapping[str, str] | None = None,
        **more: Any,
    ) -> SparkSettings:
        """The settings of the jobs: these options, the connector's defaults where none is given, how
        to reach S3 and its private settings; ``more``: the other fields of :class:`SparkSettings`."""
        return SparkSettings(
            conn_id=self.conn_id,
            jars=self.jars or default_jars,
            packages=self.packages or default_packages,
            conf=dict(self.conf),
            private_conf=dict(private_conf or {}),
            storage=storage,
            **{name: getattr(self, name) for name in RESOURCES},
            **more,
        )


RESOURCES = ("executor_cores", "executor_memory", "driver_memory", "num_executors", "total_executor_cores")
# The operator parameters (and CLI destinations) of the options, and the templated ones.
SPARK_PARAMS: tuple[str, ...] = option_names(SparkJobOptions)
CONNECTOR_PARAMS: tuple[str, ...] = ("spark_conn_id", "spark_jars", "spark_packages")
SPARK_TEMPLATE_FIELDS: tuple[str, ...] = templated_names(SparkJobOptions)


@dataclass(frozen=True)
class ReadOptions:
    """The read step's own option (beside its Spark options): how finely Spark splits the read."""

    min_partitions: int | str | None = option(None, "Spark tasks for the read", default_doc="at least one per core")


def _conf(value: Mapping[str, str] | Iterable[tuple[str, str] | str] | None) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        raise ConfigurationError(f"spark_conf must be a mapping of Spark settings, got {value!r}")
    return dict(conf_item(item) if isinstance(item, str) else item for item in value)


def cli_options() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The options as command-line arguments: flags and ``add_argument`` keywords (dest: the parameter)."""
    options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    for o in declared(SparkJobOptions):
        assert o.cli is not None, o.name
        default = "" if o.default_doc == "none" else f" (default: {plain(o.default_doc)})"
        kwargs: dict[str, Any] = {"dest": o.name, "default": o.default, "help": plain(o.doc) + default}
        if o.cli_type is not None:
            kwargs["type"] = o.cli_type
        if o.attribute == "conf":
            kwargs.update(action="append", metavar="KEY=VALUE", help=f"{kwargs['help']}, one per flag")
        else:
            kwargs["metavar"] = o.cli.lstrip("-").upper().replace("-", "_")
        options.append(((o.cli,), kwargs))
    return options
