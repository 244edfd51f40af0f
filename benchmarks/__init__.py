"""Benchmarks of airflow-kafka-offsets against the alternatives, on the local stack.

Figures, not timed tests: ``python -m benchmarks.run`` (or ``scripts/bench``) prints them and
writes ``benchmarks/results/<label>.json`` and ``.md``. See benchmarks/README.md.
"""
