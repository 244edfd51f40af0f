"""Airflow's DagBag wherever the installed Airflow keeps it: ``airflow.dag_processing.dagbag`` from 3.2 on,
``airflow.models.dagbag`` in 3.1 (imported when a test needs it: Airflow reads AIRFLOW_HOME then)."""

try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag

__all__ = ["DagBag"]
