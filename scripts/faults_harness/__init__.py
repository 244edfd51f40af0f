"""Fault-injection harness for airflow-kafka-offsets: ``scripts/faults`` (see README.md here).

Workers (:mod:`faults_harness.worker`) run one step of a batch in their own
process, the way an Airflow task does; the harness (:mod:`faults_harness.harness`)
kills or disturbs them and the services, recovers like Airflow would and
checks exactly-once (:mod:`faults_harness.verify`).
"""
