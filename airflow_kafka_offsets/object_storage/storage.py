"""Files of Spark attempts for the table sinks, through Arrow's filesystems (local disk or S3).

Only what a table sink needs: the attempt's report, the Parquet files it wrote (not its
``_errors/`` side output, not ``_SUCCESS`` or checksum files), and removing an attempt. One URI
form everywhere: ``s3a://`` locations are kept as ``s3://`` (Spark reads those through S3A too,
see :func:`airflow_kafka_offsets.object_storage.access.s3a_spark_conf`), which PyIceberg,
delta-rs and Arrow all take.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_kafka_offsets.errors import OutputLocationError
from airflow_kafka_offsets.object_storage import parquet_sizes
from airflow_kafka_offsets.object_storage.access import S3_SCHEMES, S3Access
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME
from airflow_kafka_offsets.spark_apps.kafka_batch_proof import FOOTER_COLUMNS, is_data_file, payload_bytes


def location_uri(location: str) -> str:
    """An absolute path or a URI, as a URI (``/data/lake`` -> ``file:///data/lake``), without a trailing '/'."""
    parsed = urlparse(location)
    if parsed.scheme == "":
        path = Path(location)
        if not path.is_absolute():
            raise OutputLocationError(f"output location {location!r} must be an absolute path or a URI")
        return f"file://{path.resolve()}"
    if parsed.scheme == "file":
        return f"file://{Path(parsed.path).resolve()}"
    if parsed.scheme in S3_SCHEMES:
        if not parsed.netloc:
            raise OutputLocationError(f"output location {location!r} names no bucket: use s3://bucket/path")
        return "s3://" + location.split("://", 1)[1].rstrip("/")
    raise OutputLocationError(
        f"output location {location!r}: scheme {parsed.scheme!r} is not supported (use a path, file:// or s3://)"
    )


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *parts])


@dataclass(frozen=True)
class DataFile:
    """One Parquet file an attempt wrote: its URI, size and record count (from its footer)."""

    uri: str
    size: int
    records: int
    modified_ms: int


class Storage:
    """Where a table sink's files are: local disk, or S3 reached with ``s3`` (None: local only)."""

    def __init__(self, s3: S3Access | None = None) -> None:
        self.s3 = s3

    def filesystem(self, uri: str) -> tuple[pafs.FileSystem, str]:
        """Arrow's filesystem for ``uri`` and the path in it."""
        parsed = urlsplit(uri)
        if parsed.scheme in S3_SCHEMES:
            return self._s3_filesystem(uri), f"{parsed.netloc}{parsed.path}"
        try:
            fs, path = pafs.FileSystem.from_uri(uri)
        except Exception as exc:  # Arrow raises ArrowInvalid / OSError variants
            raise OutputLocationError(f"cannot open {uri!r}: {exc}") from exc
        return fs, str(path)

    def s3_access(self, uri: str) -> S3Access:
        """How to reach ``uri`` on S3; refused when no S3 connection is configured."""
        if self.s3 is None:
            raise OutputLocationError(
                f"{uri} is on S3 but no S3 connection is configured: set [kafka_offsets] object_storage_conn_id "
                "to an Airflow connection of type kafka_offsets_object_storage or aws"
            )
        return self.s3

    def _s3_filesystem(self, uri: str) -> pafs.FileSystem:
        s3 = self.s3_access(uri)
        endpoint = urlsplit(s3.endpoint_url) if s3.endpoint_url else None
        return pafs.S3FileSystem(
            access_key=s3.access_key,
            secret_key=s3.secret_key,
            session_token=s3.session_token,
            region=s3.region,
            endpoint_override=endpoint.netloc if endpoint else None,
            scheme=endpoint.scheme if endpoint else "https",
            force_virtual_addressing=not s3.path_style,
        )

    def pyiceberg_properties(self) -> dict[str, str]:
        """PyIceberg's FileIO settings for this storage (secrets included: never log them)."""
        if self.s3 is None:
            return {}
        props = {"s3.force-virtual-addressing": str(not self.s3.path_style).lower()}
        optional = {
            "s3.endpoint": self.s3.endpoint_url,
            "s3.access-key-id": self.s3.access_key,
            "s3.secret-access-key": self.s3.secret_key,
            "s3.session-token": self.s3.session_token,
            "s3.region": self.s3.region,
        }
        return props | {k: v for k, v in optional.items() if v}

    def delta_storage_options(self) -> dict[str, str] | None:
        """delta-rs (object_store) settings; commits to the log use S3's conditional put (If-None-Match)."""
        if self.s3 is None:
            return None
        options = {
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.s3.path_style).lower(),
            "AWS_CONDITIONAL_PUT": "etag",
        }
        optional = {
            "AWS_ENDPOINT_URL": self.s3.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.s3.access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3.secret_key,
            "AWS_SESSION_TOKEN": self.s3.session_token,
            "AWS_REGION": self.s3.region,
        }
        if self.s3.endpoint_url and self.s3.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
        return options | {k: v for k, v in optional.items() if v}

    def read_report(self, staging_uri: str) -> dict[str, Any] | None:
        fs, path = self.filesystem(join(staging_uri, REPORT_NAME))
        try:
            with fs.open_input_stream(path) as stream:
                report: dict[str, Any] = json.loads(stream.read().decode("utf-8"))
        except FileNotFoundError:
            return None
        return report

    def write_bytes(self, uri: str, data: bytes) -> None:
        fs, path = self.filesystem(uri)
        fs.create_dir(posixpath.dirname(path), recursive=True)
        with fs.open_output_stream(path) as out:
            out.write(data)

    def tree_size(self, uri: str) -> int:
        """Bytes of every file under ``uri`` (what Hadoop's content summary counts)."""
        fs, base = self.filesystem(uri)
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        return sum(int(i.size or 0) for i in infos if i.type == pafs.FileType.File)

    def parquet_files(self, staging_uri: str) -> list[DataFile]:
        """The data files of an attempt, sorted; hidden and side outputs (``_*``, ``.*``) are left out."""
        found = [
            DataFile(join(staging_uri, relative), int(info.size or 0), metadata.num_rows, _modified_ms(info))
            for relative, info, metadata, _ in self._data_files(staging_uri)
        ]
        return sorted(found, key=lambda f: f.uri)

    def footers(self, staging_uri: str) -> list[dict[str, Any]]:
        """The footers of an attempt's data files, as the Spark app's proof reads them (``kafka_batch_proof``)."""
        found = []
        for relative, _, metadata, footer in self._data_files(staging_uri):
            sizes = parquet_sizes.unencoded_sizes(footer)
            groups = [_row_group(metadata.row_group(i), sizes[i]) for i in range(metadata.num_row_groups)]
            found.append({"path": relative, "row_groups": groups})
        return found

    def _data_files(self, staging_uri: str) -> Iterator[tuple[str, pafs.FileInfo, pq.FileMetaData, bytes]]:
        """Each data file of an attempt: its path under ``staging_uri``, its file info, its Parquet footer (as
        Arrow reads it, and its Thrift bytes), from one read of the file's tail."""
        fs, base = self.filesystem(staging_uri)
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
            relative = posixpath.relpath(info.path, base)
            if info.type == pafs.FileType.File and is_data_file(relative):
                with fs.open_input_file(info.path) as handle:
                    footer = parquet_sizes.read_footer(handle.size(), handle.read_at)
                metadata = pq.read_metadata(pa.BufferReader(parquet_sizes.as_metadata_file(footer)))
                yield relative, info, metadata, footer

    def batch_attempts(self, root: str) -> dict[int, list[str]]:
        """The attempt directories holding files under ``<root>/batch=<N>/``, per batch number.

        Found from the files, so the empty folders an S3 server may keep after a removal are not attempts.
        """
        fs, base = self.filesystem(root)
        found: dict[int, set[str]] = {}
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
            parts = posixpath.relpath(info.path, base).split("/")
            if info.type != pafs.FileType.File or len(parts) < 3 or not parts[0].startswith("batch="):
                continue
            if parts[0].removeprefix("batch=").isdigit():
                found.setdefault(int(parts[0].removeprefix("batch=")), set()).add(join(root, parts[0], parts[1]))
        return {batch: sorted(attempts) for batch, attempts in sorted(found.items())}

    def copy_tree(self, source: str, target: str) -> None:
        """Copy the files under ``source`` to ``target`` (same relative paths); a file already there
        with the same size is kept, so a copy that crashed is finished, not redone."""
        fs, base = self.filesystem(source)
        target_fs, target_base = self.filesystem(target)
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
            if info.type != pafs.FileType.File:
                continue
            destination = posixpath.join(target_base, posixpath.relpath(info.path, base))
            if target_fs.get_file_info(destination).size == info.size:
                continue
            target_fs.create_dir(posixpath.dirname(destination), recursive=True)
            with fs.open_input_stream(info.path) as reader, target_fs.open_output_stream(destination) as writer:
                while chunk := reader.read(8 << 20):
                    writer.write(chunk)

    def exists(self, uri: str) -> bool:
        """A file, or a directory holding files (on S3 a prefix exists only through its objects)."""
        fs, path = self.filesystem(uri)
        info = fs.get_file_info(path)
        if info.type != pafs.FileType.Directory:
            return bool(info.type != pafs.FileType.NotFound)
        listed = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        return any(i.type == pafs.FileType.File for i in listed)

    def remove_tree(self, uri: str) -> None:
        """Remove a directory, and its parent once that is empty (an attempt, then its batch's directory)."""
        fs, path = self.filesystem(uri)
        for info in fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
            if info.type == pafs.FileType.File:
                fs.delete_file(info.path)
        try:
            if fs.get_file_info(path).type == pafs.FileType.Directory:
                fs.delete_dir(path)
        except FileNotFoundError:
            pass  # on S3 the prefix went with its last object (a server may keep an empty folder entry)
        parent = posixpath.dirname(path.rstrip("/"))
        if not fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True)):
            fs.delete_dir(parent)


def _modified_ms(info: pafs.FileInfo) -> int:
    return int(info.mtime.timestamp() * 1000) if info.mtime else 0


def _row_group(group: Any, sizes: Mapping[str, int | None]) -> dict[str, Any]:
    """A row group's record count, (min, max, nulls) of the proof's columns, from Arrow's metadata, and its
    key + value bytes from the footer's size statistics (``parquet_sizes``)."""
    columns: dict[str, list[Any]] = {}
    for index in range(group.num_columns):
        chunk = group.column(index)
        if chunk.path_in_schema not in FOOTER_COLUMNS:
            continue
        stats = chunk.statistics if chunk.is_stats_set else None
        if stats is None:
            columns[chunk.path_in_schema] = [None, None, None]
            continue
        nulls = stats.null_count if stats.has_null_count else None
        columns[chunk.path_in_schema] = [stats.min, stats.max, nulls] if stats.has_min_max else [None, None, nulls]
    return {"records": group.num_rows, "columns": columns, "payload_bytes": payload_bytes(sizes)}
