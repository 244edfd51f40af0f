"""The ledger's tables, as an ordered list of migrations the package applies itself."""

from __future__ import annotations

import re

from airflow_kafka_offsets.errors import InvalidPipelineSpecError

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def quote_schema(schema: str) -> str:
    """Schema names are interpolated into SQL, so only a strict alphabet is accepted."""
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise InvalidPipelineSpecError(
            f"invalid ledger schema name {schema!r}: use lower-case letters, digits and '_' "
            "(at most 63, not starting with a digit or 'pg_')"
        )
    return f'"{schema}"'


# Each entry moves the schema from version i to i + 1. Never edit a released
# entry: append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE {s}.pipelines (
            name          text PRIMARY KEY,
            spec          jsonb NOT NULL,
            epoch         integer NOT NULL DEFAULT 0,
            next_batch_id bigint NOT NULL DEFAULT 1,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE {s}.cursors (
            pipeline    text NOT NULL REFERENCES {s}.pipelines (name),
            topic       text NOT NULL,
            partition   integer NOT NULL,
            next_offset bigint NOT NULL CHECK (next_offset >= 0),
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (pipeline, topic, partition)
        )
        """,
        """
        CREATE TABLE {s}.batches (
            pipeline          text NOT NULL REFERENCES {s}.pipelines (name),
            batch_id          bigint NOT NULL,
            epoch             integer NOT NULL,
            state             text NOT NULL CHECK (state IN ('planned', 'committed', 'aborted')),
            output_uri        text NOT NULL,
            records_planned   bigint NOT NULL,
            records_committed bigint,
            output_bytes      bigint,
            report            jsonb,
            planned_at        timestamptz NOT NULL DEFAULT now(),
            committed_at      timestamptz,
            aborted_at        timestamptz,
            abort_reason      text,
            planned_by        jsonb NOT NULL DEFAULT '{{}}',
            committed_by      jsonb,
            PRIMARY KEY (pipeline, batch_id),
            CHECK ((state = 'committed') = (committed_at IS NOT NULL))
        )
        """,
        "CREATE UNIQUE INDEX batches_one_planned ON {s}.batches (pipeline) WHERE state = 'planned'",
        """
        CREATE TABLE {s}.batch_ranges (
            pipeline      text NOT NULL,
            batch_id      bigint NOT NULL,
            epoch         integer NOT NULL,
            topic         text NOT NULL,
            partition     integer NOT NULL,
            cursor_offset bigint NOT NULL,
            start_offset  bigint NOT NULL,
            end_offset    bigint NOT NULL,
            live          boolean NOT NULL DEFAULT true,
            records       bigint,
            min_offset    bigint,
            max_offset    bigint,
            payload_bytes bigint,
            PRIMARY KEY (pipeline, batch_id, topic, partition),
            FOREIGN KEY (pipeline, batch_id) REFERENCES {s}.batches (pipeline, batch_id),
            CHECK (0 <= cursor_offset AND cursor_offset <= start_offset AND start_offset <= end_offset),
            EXCLUDE USING gist (
                pipeline WITH =, epoch WITH =, topic WITH =, partition WITH =,
                int8range(cursor_offset, end_offset) WITH &&
            ) WHERE (live)
        )
        """,
        """
        CREATE TABLE {s}.attempts (
            attempt_id  text PRIMARY KEY,
            pipeline    text NOT NULL,
            batch_id    bigint NOT NULL,
            state       text NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
            staging_uri text NOT NULL,
            started_at  timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            error       text,
            report      jsonb,
            actor       jsonb NOT NULL DEFAULT '{{}}',
            FOREIGN KEY (pipeline, batch_id) REFERENCES {s}.batches (pipeline, batch_id)
        )
        """,
        "CREATE INDEX attempts_by_batch ON {s}.attempts (pipeline, batch_id)",
        """
        CREATE TABLE {s}.audit (
            id       bigserial PRIMARY KEY,
            at       timestamptz NOT NULL DEFAULT now(),
            pipeline text NOT NULL,
            batch_id bigint,
            event    text NOT NULL,
            detail   jsonb NOT NULL DEFAULT '{{}}',
            actor    jsonb NOT NULL DEFAULT '{{}}'
        )
        """,
        "CREATE INDEX audit_by_pipeline ON {s}.audit (pipeline, id)",
    ),
    (
        # Offset resets are batches too, so the ledger accounts for every skipped or rewound span.
        "ALTER TABLE {s}.batches ADD COLUMN kind text NOT NULL DEFAULT 'ingest' CHECK (kind IN ('ingest', 'reset'))",
        "ALTER TABLE {s}.batch_ranges ADD COLUMN previous_offset bigint",
        # Records whose payload the optional JSON decode step could not parse (kept raw, listed in _errors/).
        "ALTER TABLE {s}.batch_ranges ADD COLUMN decode_errors bigint",
    ),
    (
        # Attempts hold a lease renewed while Spark runs; a running attempt whose lease ran out is
        # dead (its worker was killed) and is marked so. Attempts started before have no lease: dead.
        "ALTER TABLE {s}.attempts ADD COLUMN heartbeat_at timestamptz",
        "ALTER TABLE {s}.attempts ADD COLUMN lease_expires_at timestamptz",
        "ALTER TABLE {s}.attempts DROP CONSTRAINT attempts_state_check",
        "ALTER TABLE {s}.attempts ADD CONSTRAINT attempts_state_check"
        " CHECK (state IN ('running', 'succeeded', 'failed', 'dead'))",
        "CREATE INDEX attempts_running ON {s}.attempts (pipeline, batch_id) WHERE state = 'running'",
    ),
    (
        # A pipeline's identity in the tables it writes (Delta's txnAppId, Iceberg snapshot
        # summaries): a ledger started over with the same pipeline name is another writer.
        "ALTER TABLE {s}.pipelines ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid()",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
