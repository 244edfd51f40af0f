"""The decoding a batch was planned with (``batches.decode``), when it was resolved at plan time.

An Avro pipeline's reader schema comes from a schema registry; the one in force when a batch is
planned is written beside the plan, in the plan's transaction, and never changes afterwards (like
the plan's ranges): every read of the batch, a retry's, a crashed worker's successor's or a
replay's after the subject gained versions, decodes with it. Batches of other pipelines record
none and are read with the pipeline spec's decoding.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_kafka_offsets.core.model import DecodeSpec
from airflow_kafka_offsets.errors import BatchNotFoundError
from airflow_kafka_offsets.ledger.sql import Statements


class DecodingStatements(Statements):
    def record_batch_decode(self, pipeline: str, batch_id: int, decode: DecodeSpec) -> None:
        """Write a just planned batch's decoding (the caller's transaction inserted the plan)."""
        updated = self.execute(
            "UPDATE {s}.batches SET decode = %s::jsonb WHERE pipeline = %s AND batch_id = %s AND state = 'planned'",
            (json.dumps(decode.batch_json(), sort_keys=True), pipeline, batch_id),
        ).rowcount
        if updated != 1:
            raise BatchNotFoundError(
                f"pipeline {pipeline!r} has no planned batch {batch_id} to record its decoding with"
            )

    def batch_decode(self, pipeline: str, batch_id: int) -> DecodeSpec | None:
        """The decoding batch ``batch_id`` was planned with; None when it recorded none."""
        # to_jsonb of the row: a ledger not yet migrated to schema 8 (the tests of older ledgers' history) has
        # no decode column and reads as a batch that recorded none
        row = self.fetchone(
            "SELECT to_jsonb(b) -> 'decode' FROM {s}.batches b WHERE pipeline = %s AND batch_id = %s",
            (pipeline, batch_id),
        )
        if row is None:
            raise BatchNotFoundError(f"pipeline {pipeline!r} has no batch {batch_id}")
        return _decode(row[0])

    def last_recorded_decode(self, pipeline: str) -> tuple[int, DecodeSpec] | None:
        """The newest batch (planned or committed, not aborted) that recorded a decoding, and that decoding."""
        row = self.fetchone(
            "SELECT batch_id, decode FROM {s}.batches WHERE pipeline = %s AND decode IS NOT NULL AND state <> 'aborted'"
            " ORDER BY batch_id DESC LIMIT 1",
            (pipeline,),
        )
        if row is None:
            return None
        decode = _decode(row[1])
        return (int(row[0]), decode) if decode is not None else None


def _decode(value: Any) -> DecodeSpec | None:
    if value is None:
        return None
    data = json.loads(value) if isinstance(value, str) else value
    return DecodeSpec.from_json(data)
