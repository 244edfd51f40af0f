"""Spark: where a batch's read runs (spark-submit or a Spark Connect server), which Spark that is,
the connector it needs, and what its failures mean. It runs with the Spark connection it is given
(:class:`~.connection.SparkConnection`, read from Airflow by ``hooks/spark.py``) and reads none itself."""
