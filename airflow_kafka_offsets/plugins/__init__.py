"""Airflow plugin: the "Kafka pipelines" page in Airflow's navigation (entry point ``airflow.plugins``)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_kafka_offsets.plugins.pipelines_app import URL_PREFIX, create_app


class KafkaPipelinesPlugin(AirflowPlugin):
    name = "kafka_offsets"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Kafka pipelines"}]
    external_views = [
        {
            "name": "Kafka pipelines",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "kafka-pipelines",
        }
    ]
