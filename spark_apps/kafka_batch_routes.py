"""The Spark app's many-tables step (job field ``routing``): the table each record lands in, and the report of
where the batch's records landed.

Part of the app (``kafka_range_batch.py``), shipped beside it with ``--py-files``; imports nothing from Airflow.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if __package__:  # imported by the package (Spark Connect mode): the contract is its sibling
    from . import kafka_batch_contract as contract
else:  # spark-submit ships it beside this file (--py-files)
    import kafka_batch_contract as contract


def route_column(routing: dict) -> Column:
    """The table each record lands in (null: no route), as ``TableRoutes.table_for`` in the package says.

    A mapped topic goes to its table; the others to ``prefix + <header value> + suffix`` when that
    table is allowed, else to the fallback table (null without one).
    """
    routed: Column = F.lit(None).cast("string")
    if routing.get("header"):
        named = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(routing["header"]))
        value = F.try_element_at(named, F.lit(1))["value"].cast("string")
        table = F.concat(F.lit(routing["prefix"]), value, F.lit(routing["suffix"]))
        allowed = table.isin(list(routing["allow"]))
        routed = F.when(allowed, table).otherwise(F.lit(routing.get("fallback")).cast("string"))
    for topic, name in sorted(routing["topics"].items(), reverse=True):
        routed = F.when(F.col("topic") == F.lit(topic), F.lit(name)).otherwise(routed)
    return routed


def route_report(written: DataFrame, routing: dict) -> dict:
    """Records per table and where in each partition they are, and how many had no route (with up to 10
    of their header values)."""
    per_partition = (
        written.groupBy(contract.TABLE_COLUMN, "topic", "partition")
        .agg(F.count(F.lit(1)).alias("n"), F.min("offset").alias("first"), F.max("offset").alias("last"))
        .collect()
    )
    counts: dict[str | None, int] = {}
    landed: dict[str, list[dict]] = {}
    for row in sorted(per_partition, key=lambda r: (r[0] is None, r[0] or "", r["topic"], r["partition"])):
        counts[row[0]] = counts.get(row[0], 0) + int(row["n"])
        if row[0] is not None:
            landed.setdefault(row[0], []).append(
                {
                    "topic": row["topic"],
                    "partition": int(row["partition"]),
                    "start": int(row["first"]),
                    "end": int(row["last"]) + 1,
                    "records": int(row["n"]),
                }
            )
    unrouted = counts.pop(None, 0)
    values: list[str | None] = []
    if unrouted and routing.get("header"):
        named = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(routing["header"]))
        rows = written.where(F.col(contract.TABLE_COLUMN).isNull()).select(
            F.try_element_at(named, F.lit(1))["value"].cast("string")
        )
        values = sorted((row[0] for row in rows.distinct().limit(10).collect()), key=lambda v: (v is None, v or ""))
    tables = {str(t): n for t, n in sorted(counts.items(), key=lambda kv: str(kv[0]))}
    return {"tables": tables, "unrouted": unrouted, "unrouted_values": values, "landed": landed}
