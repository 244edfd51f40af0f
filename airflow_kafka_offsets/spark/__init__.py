"""Spark: where a batch's read runs (spark-submit or a Spark Connect server), which Spark that is,
the connector it needs, and what its failures mean."""
