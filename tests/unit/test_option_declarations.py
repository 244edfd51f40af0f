"""Every surface that takes a pipeline or Spark option reads it from its one declaration: a surface
that drifts from the declarations (a missing keyword argument, template field, key, flag or form
field, a spec argument build_spec does not take) fails here."""

from __future__ import annotations

import inspect
from dataclasses import fields
from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_kafka_offsets.cli import build_parser
from airflow_kafka_offsets.cli.arguments import operation_options
from airflow_kafka_offsets.core.operation_fields import FIELDS_BY_NAME, operation
from airflow_kafka_offsets.core.operations.change_spec import spec_changes
from airflow_kafka_offsets.core.options import declared, option_names, templated_names
from airflow_kafka_offsets.core.plan_options import NOT_IN_SPEC, PlanOptions
from airflow_kafka_offsets.core.spec import build_spec, updated_spec
from airflow_kafka_offsets.operators import (
    KafkaBatchOperator,
    KafkaBatchPlanOperator,
    KafkaBatchSparkOperator,
    KafkaPipelineOperationOperator,
    kafka_ingest_task_group,
)
from airflow_kafka_offsets.spark.options import CONNECTOR_PARAMS, ReadOptions, SparkJobOptions

PLAN_OPERATORS = (KafkaBatchPlanOperator, KafkaBatchOperator)
READ_OPERATORS = (KafkaBatchSparkOperator, KafkaBatchOperator)
SPARK_OPERATORS = (KafkaBatchSparkOperator, KafkaBatchOperator, KafkaPipelineOperationOperator)


def signature_defaults(cls: type) -> dict[str, Any]:
    """The keyword arguments ``cls`` takes (through its classes' ``__init__``), with their defaults."""
    params: dict[str, Any] = {}
    for c in reversed(cls.__mro__):
        if "__init__" in vars(c):
            sig = inspect.signature(c.__init__)
            params.update({n: p.default for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY})
    return params


@pytest.mark.parametrize(
    "operators,declaration,own",
    [
        (PLAN_OPERATORS, PlanOptions, None),
        (READ_OPERATORS, ReadOptions, None),
        (SPARK_OPERATORS, SparkJobOptions, None),
        ((KafkaBatchPlanOperator,), SparkJobOptions, CONNECTOR_PARAMS),
    ],
)
def test_each_operator_takes_the_declared_options_with_their_defaults_and_templates(
    operators: tuple[type, ...], declaration: type, own: tuple[str, ...] | None
) -> None:
    for cls in operators:
        params = signature_defaults(cls)
        for o in declared(declaration):
            if own is not None and o.name not in own:
                assert o.name not in params, (cls.__name__, o.name)
                continue
            assert o.name in params, (cls.__name__, o.name)
            if (cls, o.name) != (KafkaBatchPlanOperator, "spark_conn_id"):  # set: check Spark before planning
                assert params[o.name] == o.default, (cls.__name__, o.name)
            assert (o.name in cls.template_fields) is o.templated, (cls.__name__, o.name)


def test_an_operator_stores_each_option_given_and_refuses_an_unknown_one() -> None:
    values: dict[str, Any] = {
        "starting_offsets": "latest",
        "max_records_per_batch": "{{ params.cap }}",
        "kafka_timeout_s": 5.0,
        "min_partitions": 4,
        "spark_conf": {"spark.x": "1"},
        "executor_memory": "2g",
    }
    op = KafkaBatchOperator(task_id="t", pipeline="p", topics="a", output_root="/o", kafka_asset_server="k:1", **values)
    assert {name: getattr(op, name) for name in values} == values
    assert op.keep_raw_value is None and op.spark_conn_id == SparkJobOptions().conn_id
    with pytest.raises(TypeError, match="max_records_per_bach"):
        KafkaBatchPlanOperator(
            task_id="u", pipeline="p", topics="a", output_root="/o", kafka_asset_server="k:1", max_records_per_bach=1
        )


def test_default_args_fill_declared_options() -> None:
    with DAG("defaults", schedule=None, start_date=datetime(2026, 1, 1), default_args={"min_partitions": 3}):
        op = KafkaBatchSparkOperator(task_id="read", pipeline="p")
    assert op.min_partitions == 3


def test_the_spec_options_are_build_specs_arguments_and_updated_specs_fields() -> None:
    spec_options = [f.name for f in fields(PlanOptions) if f.name not in NOT_IN_SPEC]
    keyword_only = [
        n for n, p in inspect.signature(build_spec).parameters.items() if p.kind is p.KEYWORD_ONLY and n != "sink"
    ]
    assert keyword_only == spec_options
    stored = build_spec("p", ["a"], "/o")
    assert build_spec("p", ["a"], "/o", **PlanOptions().spec_kwargs()) == stored
    assert updated_spec(stored, {name: getattr(PlanOptions(), name) for name in spec_options}) == stored


def test_the_change_spec_form_and_flags_are_the_options_declared_with_a_form_label() -> None:
    changeable = [o for o in declared(PlanOptions) if o.form]
    assert {o.name for o in changeable} == {
        "new_partition_offsets",
        "on_data_loss",
        "max_records_per_batch",
        "max_records_per_partition",
    }
    flags = {opt.flags[0]: opt.kwargs.get("dest") for opt in operation_options(operation("change_spec"))}
    for o in changeable:
        form_field = FIELDS_BY_NAME[f"spec_{o.name}"]
        assert form_field.cli == o.cli and flags[o.cli] == f"spec_{o.name}"
        assert form_field.enum == (o.choices or None)
    args = build_parser().parse_args(["change-spec", "p", "--max-records-per-batch", "none", "--on-data-loss", "skip"])
    assert (args.spec_max_records_per_batch, args.spec_on_data_loss) == ("none", "skip")
    values = {"spec_max_records_per_batch": "none", "spec_on_data_loss": "skip", "spec_new_partition_offsets": None}
    assert spec_changes(values) == {"max_records_per_batch": None, "on_data_loss": "skip"}


def test_the_task_group_and_the_cli_take_the_declared_names() -> None:
    from airflow_kafka_offsets.operators.task_group import PLAN_KWARGS, SPARK_KWARGS

    assert PLAN_KWARGS == option_names(PlanOptions)
    assert set(SPARK_KWARGS) == {*option_names(SparkJobOptions), *option_names(ReadOptions)} - {"spark_conn_id"}
    with DAG("group", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        kafka_ingest_task_group(
            "g",
            pipeline="p",
            topics="a",
            output_root="/o",
            kafka_asset_server="k:1",
            plan_kwargs={name: getattr(PlanOptions(), name) for name in PLAN_KWARGS},
            spark_kwargs={"min_partitions": 2, "executor_cores": 1},
        )
    assert dag.get_task("g.read").min_partitions == 2
    spark_flags = {o.cli for o in declared(SparkJobOptions)}
    replay_flags = {opt.flags[0] for opt in operation_options(operation("replay"))}
    assert spark_flags <= replay_flags
    assert set(templated_names(SparkJobOptions)) == {"spark_conn_id", "spark_conf", "spark_jars", "spark_packages"}
