"""The floor of any spark-submit batch: start Spark, run ``spark.range(10).count()``, stop.

Submitted by the overhead section with the package's jars and Spark settings, so the ratio of a
small batch to this run is what the package adds to starting Spark at all.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main() -> int:
    spark = SparkSession.builder.getOrCreate()
    try:
        count = spark.range(10).count()
        if count != 10:
            raise RuntimeError(f"spark.range(10).count() returned {count}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
