"""PySpark applications submitted by the operators; they import nothing from Airflow."""
