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


# The body of the trigger function on batch_ranges, in parts: migration 4 refuses overlapping live
# ranges, migration 6 also ranges of a batch that does not exist. ``changed`` names the rows to check:
# the statement's new rows, or the one updated row.
_CHECK_START = """\
        DECLARE
            changed text := 'added';
            clash text;
        BEGIN
            IF TG_LEVEL = 'ROW' THEN
                changed := format('(SELECT * FROM {s}.batch_ranges WHERE (pipeline, batch_id, topic, partition)'
                                  ' = (%L, %L, %L, %L))', NEW.pipeline, NEW.batch_id, NEW.topic, NEW.partition);
            END IF;
            EXECUTE format('SELECT FROM {s}.pipelines WHERE name IN (SELECT pipeline FROM %s c)'
                           ' ORDER BY name FOR UPDATE', changed);
"""
_OF_A_BATCH = """\
            EXECUTE format('SELECT FROM {s}.batches WHERE (pipeline, batch_id) IN (SELECT pipeline, batch_id FROM %s c)'
                           ' ORDER BY pipeline, batch_id FOR KEY SHARE', changed);
            EXECUTE format($q$
                SELECT format('Key (pipeline, batch_id)=(%%s, %%s) is not present in table "batches".',
                              c.pipeline, c.batch_id)
                FROM (SELECT DISTINCT pipeline, batch_id FROM %s c) c WHERE NOT EXISTS (
                    SELECT FROM {s}.batches b WHERE b.pipeline = c.pipeline AND b.batch_id = c.batch_id)
                LIMIT 1 $q$, changed) INTO clash;
            IF clash IS NOT NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', DETAIL = clash,
                    MESSAGE = 'insert or update on table "batch_ranges" violates foreign key constraint'
                              ' "batch_ranges_pipeline_batch_id_fkey"',
                    SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, CONSTRAINT = 'batch_ranges_pipeline_batch_id_fkey';
            END IF;
"""
_NO_OVERLAP = """\
            EXECUTE format($q$
                SELECT format('Key (pipeline, epoch, topic, partition, int8range(cursor_offset, end_offset))'
                              '=(%%s, %%s, %%s, %%s, %%s) conflicts with existing key (pipeline, epoch, topic,'
                              ' partition, int8range(cursor_offset, end_offset))=(%%s, %%s, %%s, %%s, %%s).',
                              c.pipeline, c.epoch, c.topic, c.partition, int8range(c.cursor_offset, c.end_offset),
                              c.pipeline, c.epoch, c.topic, c.partition, int8range(r.cursor_offset, r.end_offset))
                FROM %s c CROSS JOIN LATERAL (
                    SELECT o.cursor_offset, o.end_offset FROM {s}.batch_ranges o
                    WHERE o.pipeline = c.pipeline AND o.topic = c.topic AND o.partition = c.partition
                      AND o.epoch = c.epoch AND o.live AND o.cursor_offset < o.end_offset
                      AND o.end_offset > c.cursor_offset AND o.cursor_offset < c.end_offset
                      AND o.batch_id <> c.batch_id
                    ORDER BY o.end_offset LIMIT 1) r
                WHERE c.live AND c.cursor_offset < c.end_offset
                LIMIT 1 $q$, changed) INTO clash;
            IF clash IS NOT NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'exclusion_violation', DETAIL = clash,
                    MESSAGE = 'conflicting key value violates exclusion constraint "batch_ranges_no_overlap"',
                    SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, CONSTRAINT = 'batch_ranges_no_overlap';
            END IF;
"""
_CHECK_END = """\
            RETURN NULL;
        END
        $fn$
        """

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
        # Overlapping ranges are refused once per statement instead of once per row: the GiST exclusion
        # constraint cost a GiST insert and search per range (seconds for a plan of 10,000 partitions).
        # The statement-level triggers below refuse the same rows with the same SQLSTATE (23P01): a live,
        # non-empty range that overlaps another live one of its pipeline, epoch and partition (empty
        # ranges overlap nothing). Writers of one pipeline take turns on its row, so a concurrent
        # writer's ranges are seen.
        "ALTER TABLE {s}.batch_ranges DROP CONSTRAINT batch_ranges_pipeline_epoch_topic_partition_int8range_excl",
        "CREATE INDEX batch_ranges_by_partition ON {s}.batch_ranges (pipeline, topic, partition, epoch, end_offset)"
        " WHERE live AND cursor_offset < end_offset",
        "\n        CREATE FUNCTION {s}.refuse_overlapping_ranges() RETURNS trigger LANGUAGE plpgsql AS $fn$\n"
        + _CHECK_START
        + _NO_OVERLAP
        + _CHECK_END,
        "CREATE TRIGGER batch_ranges_no_overlap_insert AFTER INSERT ON {s}.batch_ranges"
        " REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse_overlapping_ranges()",
        # Commits and aborts change no range and leave this trigger asleep.
        "CREATE TRIGGER batch_ranges_no_overlap_update AFTER UPDATE ON {s}.batch_ranges FOR EACH ROW"
        " WHEN (NEW.live AND NEW.cursor_offset < NEW.end_offset AND (NOT OLD.live"
        "   OR (NEW.pipeline, NEW.batch_id, NEW.topic, NEW.partition, NEW.epoch, NEW.cursor_offset, NEW.end_offset)"
        "      IS DISTINCT FROM"
        "      (OLD.pipeline, OLD.batch_id, OLD.topic, OLD.partition, OLD.epoch, OLD.cursor_offset, OLD.end_offset)))"
        " EXECUTE FUNCTION {s}.refuse_overlapping_ranges()",
        # Room on each page for the row's next version, so the commit's update of a range (its counts)
        # and of a cursor is a heap-only update that writes no index entry. A range is updated once,
        # growing by its five counts; a cursor at every batch.
        "ALTER TABLE {s}.batch_ranges SET (fillfactor = 40)",
        "ALTER TABLE {s}.cursors SET (fillfactor = 50)",
    ),
    (
        # A pipeline's identity in the tables it writes (Delta's txnAppId, Iceberg snapshot
        # summaries): a ledger started over with the same pipeline name is another writer.
        "ALTER TABLE {s}.pipelines ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid()",
    ),
    (
        # A range's batch must exist: checked once per statement instead of once per row. The foreign key
        # cost a lookup and a lock per range (a fifth of a plan at 10,000 partitions); the statement-level
        # overlap trigger now also locks the batches it adds ranges to (FOR KEY SHARE, as the key did) and
        # refuses ranges of a missing batch with the same SQLSTATE (23503), and a batch that still has ranges
        # cannot be deleted or renumbered.
        "ALTER TABLE {s}.batch_ranges DROP CONSTRAINT batch_ranges_pipeline_batch_id_fkey",
        "\n        CREATE OR REPLACE FUNCTION {s}.refuse_overlapping_ranges() RETURNS trigger LANGUAGE plpgsql"
        " AS $fn$\n" + _CHECK_START + _OF_A_BATCH + _NO_OVERLAP + _CHECK_END,
        # An update that moves a range to another batch is checked too, whether or not the range is live.
        "DROP TRIGGER batch_ranges_no_overlap_update ON {s}.batch_ranges",
        "CREATE TRIGGER batch_ranges_no_overlap_update AFTER UPDATE ON {s}.batch_ranges FOR EACH ROW"
        " WHEN ((NEW.pipeline, NEW.batch_id) IS DISTINCT FROM (OLD.pipeline, OLD.batch_id)"
        "   OR NEW.live AND NEW.cursor_offset < NEW.end_offset AND (NOT OLD.live"
        "   OR (NEW.topic, NEW.partition, NEW.epoch, NEW.cursor_offset, NEW.end_offset)"
        "      IS DISTINCT FROM (OLD.topic, OLD.partition, OLD.epoch, OLD.cursor_offset, OLD.end_offset)))"
        " EXECUTE FUNCTION {s}.refuse_overlapping_ranges()",
        """
        CREATE FUNCTION {s}.keep_batches_with_ranges() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF TG_OP = 'UPDATE' AND (NEW.pipeline, NEW.batch_id) = (OLD.pipeline, OLD.batch_id) THEN
                RETURN NULL;
            END IF;
            IF EXISTS (SELECT FROM {s}.batch_ranges WHERE pipeline = OLD.pipeline AND batch_id = OLD.batch_id) THEN
                RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                    MESSAGE = 'update or delete on table "batches" violates foreign key constraint'
                              ' "batch_ranges_pipeline_batch_id_fkey" on table "batch_ranges"',
                    DETAIL = format('Key (pipeline, batch_id)=(%s, %s) is still referenced from table "batch_ranges".',
                                    OLD.pipeline, OLD.batch_id),
                    SCHEMA = TG_TABLE_SCHEMA, TABLE = 'batch_ranges',
                    CONSTRAINT = 'batch_ranges_pipeline_batch_id_fkey';
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        "CREATE TRIGGER batches_keep_ranges AFTER DELETE OR UPDATE OF pipeline, batch_id ON {s}.batches"
        " FOR EACH ROW EXECUTE FUNCTION {s}.keep_batches_with_ranges()",
    ),
    (
        # TRUNCATE fires no row trigger: without the foreign key, emptying batches would leave every
        # range without its batch. Refused, as the key refused it, while any range is left; empty
        # batch_ranges first (which leaves the cursors, so nothing is read again).
        """
        CREATE FUNCTION {s}.refuse_truncating_batches_with_ranges() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF EXISTS (SELECT FROM {s}.batch_ranges) THEN
                RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
                    MESSAGE = 'cannot truncate a table referenced in a foreign key constraint',
                    DETAIL = 'Table "batch_ranges" references "batches".',
                    HINT = 'Truncate table "batch_ranges" first.';
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        "CREATE TRIGGER batches_keep_ranges_on_truncate BEFORE TRUNCATE ON {s}.batches"
        " FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse_truncating_batches_with_ranges()",
    ),
    (
        # The decoding a batch was planned with, when it is resolved at plan time (Avro: the reader
        # schema from the registry, with its subject, version and id); every read of the batch, a
        # replay too, uses it. Null: the pipeline spec's decoding (JSON, or none).
        "ALTER TABLE {s}.batches ADD COLUMN decode jsonb",
    ),
    (
        # A sink of many tables: what each table's commit of the batch produced, by table name
        # ({"snapshot_id": ...} for Iceberg, {"version": ...} for Delta, with "records"), so that a
        # reader can read every table as of one batch. Null for single-output sinks.
        "ALTER TABLE {s}.batches ADD COLUMN tables jsonb",
    ),
    (
        # A failed attempt's root cause: the innermost error Spark's output named (the last Java
        # "Caused by:", else the last error line), beside the error the task raised. Null for
        # successes and for attempts recorded before this column.
        "ALTER TABLE {s}.attempts ADD COLUMN root_cause text",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
