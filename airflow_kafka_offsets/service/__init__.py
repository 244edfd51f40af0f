"""The batch steps (plan, read, commit) and the manual operations, wired from core, ledger, clients and sinks.

Operators and the CLI are thin wrappers over these functions.
"""
