"""Fault-injection harness for airflow-kafka-offsets: ``scripts/faults`` (see README.md here).

Workers (:mod:`faults_harness.worker`) run one step of a batch, or the whole batch in the one-task
form, in their own process, the way an Airflow task does. A trial (:mod:`faults_harness.trial`)
runs DAG runs of them (:mod:`faults_harness.driver`) on a trial's pipeline
(:mod:`faults_harness.pipeline`), injects a fault kind (:mod:`faults_harness.kinds`, their monitors
in :mod:`faults_harness.monitors`), recovers like Airflow would and checks exactly-once
(:mod:`faults_harness.verify`); :mod:`faults_harness.results` prints what it found.
"""
