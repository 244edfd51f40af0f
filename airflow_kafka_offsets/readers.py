"""What a reader of a pipeline's output reads: the output locations of its committed batches.

The ledger decides what is visible: a location is listed only once its batch is committed,
and every listed location holds a readable Parquet output (a batch that read no records has
one file with no rows). Reset batches move cursors only and have no output; they are not listed.
On S3 a location holds the batch's ``_manifest``, which lists exactly the files of the attempt
that was published: :func:`output_files` follows it, :func:`read_output` reads them.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_kafka_offsets.errors import BatchNotFoundError, OutputLocationError
from airflow_kafka_offsets.ledger import CommittedOutput, Ledger
from airflow_kafka_offsets.object_storage import storage as files
from airflow_kafka_offsets.object_storage.access import S3Access, is_object_store
from airflow_kafka_offsets.sinks.manifest import ManifestDirectorySink


def committed_outputs(ledger: Ledger, pipeline: str, since_batch: int | None = None) -> list[CommittedOutput]:
    """The outputs of the pipeline's committed batches in batch order, after ``since_batch`` if given.

    An incremental reader passes the last batch id it has read. Raises
    :class:`~airflow_kafka_offsets.errors.PipelineNotFoundError` for a pipeline the ledger does not know.
    """
    with ledger.transaction() as tx:
        tx.pipeline_spec(pipeline)  # an unknown pipeline is an error, not an empty list
        return tx.committed_outputs(pipeline, since_batch or 0)


def committed_output(ledger: Ledger, pipeline: str, batch_id: int) -> CommittedOutput:
    """One committed batch's output, e.g. the batch an asset event names.

    Raises :class:`~airflow_kafka_offsets.errors.BatchNotFoundError` when the ledger holds no
    committed ingest batch ``batch_id`` for the pipeline.
    """
    found = committed_outputs(ledger, pipeline, since_batch=batch_id - 1)[:1]
    if not found or found[0].batch_id != batch_id:
        raise BatchNotFoundError(
            f"pipeline {pipeline!r} has no committed batch {batch_id}; "
            f"`airflow-kafka-offsets status {pipeline}` lists its batches"
        )
    return found[0]


def output_files(output: CommittedOutput, s3: S3Access | None = None) -> list[str]:
    """The Parquet files that hold a committed batch of a directory sink, as URIs.

    On S3 exactly the files its manifest lists (``s3``: how to reach the bucket, e.g.
    ``airflow_kafka_offsets.runtime.object_storage(uri)``); on a filesystem the batch directory's
    data files. Raises :class:`~airflow_kafka_offsets.errors.OutputLocationError` when a batch
    on S3 has no manifest, or one of another batch.
    """
    if not is_object_store(output.uri):
        return [f.uri for f in files.Storage().parquet_files(output.uri)]
    root, pipeline = output.uri.rsplit("/", 2)[:2]
    manifest = ManifestDirectorySink(root, s3).read_manifest(output.uri)
    if manifest is None or (manifest.pipeline, manifest.batch_id) != (pipeline, output.batch_id):
        raise OutputLocationError(
            f"committed batch {output.batch_id} at {output.uri} has no manifest of its own: the output was changed "
            "outside the pipeline; replay the batch to publish it again"
        )
    return [f.uri for f in manifest.files]


def read_output(output: CommittedOutput, s3: S3Access | None = None) -> pa.Table:
    """A committed batch's records, read from exactly :func:`output_files`."""
    storage = files.Storage(s3)
    tables = []
    for uri in output_files(output, s3):
        fs, path = storage.filesystem(uri)
        tables.append(pq.read_table(path, filesystem=fs))
    return pa.concat_tables(tables)
