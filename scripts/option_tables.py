"""Write the option tables of ``docs/dags.md`` from the options' declarations.

Each table follows its heading; ``python scripts/option_tables.py`` rewrites them from
:class:`~airflow_kafka_offsets.core.plan_options.PlanOptions`,
:class:`~airflow_kafka_offsets.core.sink_options.SinkOptions`,
:class:`~airflow_kafka_offsets.spark.options.SparkJobOptions` and
:class:`~airflow_kafka_offsets.spark.options.ReadOptions` (``tests/unit/test_docs.py`` fails while
the page differs from what this writes).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "dags.md"
PLAN_HEADING = "Pipeline options (`plan_kwargs`)"
SPARK_HEADING = "Spark settings (`spark_kwargs`)"
SINK_HEADING = "Sink options (`sink`)"


def tables() -> dict[str, str]:
    """Each table's heading and the table its declarations make."""
    from airflow_kafka_offsets.core.options import option_table
    from airflow_kafka_offsets.core.plan_options import PlanOptions
    from airflow_kafka_offsets.core.sink_options import SinkOptions
    from airflow_kafka_offsets.spark.options import ReadOptions, SparkJobOptions

    return {
        PLAN_HEADING: option_table(PlanOptions),
        SINK_HEADING: option_table(SinkOptions, heading="key"),
        # the Spark connection is the task group's own argument
        SPARK_HEADING: option_table(SparkJobOptions, ReadOptions, heading="setting", skip=("spark_conn_id",)),
    }


def table_after(text: str, heading: str) -> tuple[int, int]:
    """Where the table following ``heading`` starts and ends in ``text``."""
    start = text.index("\n|", text.index(heading)) + 1
    return start, text.index("\n\n", start)


def rewrite(text: str) -> str:
    """``text`` with every option table as its declarations make it."""
    for heading, table in tables().items():
        start, end = table_after(text, heading)
        text = text[:start] + table + text[end:]
    return text


if __name__ == "__main__":
    PAGE.write_text(rewrite(PAGE.read_text()))
