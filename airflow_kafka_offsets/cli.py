"""``airflow-kafka-offsets status``: the ledger's view of a pipeline from a shell.

Connections come from Airflow (``--postgres-conn-id``), as for the operators.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from airflow_kafka_offsets.errors import KafkaOffsetsError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.tables import render_table


def status(ledger: Ledger, pipeline: str, last: int = 10) -> dict:
    with ledger.transaction() as tx:
        cursors = tx.cursors(pipeline)
        batches = tx.fetchall(
            "SELECT batch_id, state, records_planned, records_committed, planned_at, committed_at, output_uri"
            " FROM {s}.batches WHERE pipeline = %s ORDER BY batch_id DESC LIMIT %s",
            (pipeline, last),
        )
    return {
        "pipeline": pipeline,
        "cursors": [{"topic": tp.topic, "partition": tp.partition, "next_offset": off} for tp, off in sorted(cursors.items())],
        "batches": [
            {
                "batch_id": b[0],
                "state": b[1],
                "records_planned": b[2],
                "records_committed": b[3],
                "planned_at": b[4].isoformat() if b[4] else None,
                "committed_at": b[5].isoformat() if b[5] else None,
                "output_uri": b[6],
            }
            for b in batches
        ],
    }


def render_status(data: dict) -> str:
    cursor_rows = [[f"{c['topic']}-{c['partition']}", c["next_offset"]] for c in data["cursors"]]
    batch_rows = [
        [b["batch_id"], b["state"], b["records_planned"], b["records_committed"], b["committed_at"] or b["planned_at"]]
        for b in data["batches"]
    ]
    return (
        f"pipeline {data['pipeline']}\n\n"
        + render_table(["partition", "next offset"], cursor_rows)
        + "\n\n"
        + render_table(["batch", "state", "planned", "committed", "at"], batch_rows)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-kafka-offsets", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status", help="cursors and recent batches of a pipeline")
    st.add_argument("pipeline")
    st.add_argument("--postgres-conn-id", default="postgres_default")
    st.add_argument("--ledger-schema", default="kafka_offsets")
    st.add_argument("--last", type=int, default=10)
    st.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    from airflow_kafka_offsets.hooks import LedgerHook

    try:
        ledger = LedgerHook(args.postgres_conn_id, args.ledger_schema).get_conn()
        data = status(ledger, args.pipeline, args.last)
    except KafkaOffsetsError as exc:
        print(f"airflow-kafka-offsets: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2) if args.json else render_status(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
