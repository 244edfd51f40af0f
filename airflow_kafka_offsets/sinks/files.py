"""Files of Spark attempts for the table sinks, through Arrow's filesystems (local, or object stores).

Only what a table sink needs: the attempt's report, the Parquet files it wrote (not its
``_errors/`` side output, not ``_SUCCESS`` or checksum files), and removing an attempt.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_kafka_offsets.errors import OutputLocationError
from airflow_kafka_offsets.spark_apps.kafka_batch_contract import REPORT_NAME


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
    return location.rstrip("/")


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *parts])


@dataclass(frozen=True)
class DataFile:
    """One Parquet file an attempt wrote: its URI, size and record count (from its footer)."""

    uri: str
    size: int
    records: int
    modified_ms: int


def _fs(uri: str) -> tuple[pafs.FileSystem, str]:
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except Exception as exc:  # noqa: BLE001 - Arrow raises ArrowInvalid / OSError variants
        raise OutputLocationError(f"cannot open {uri!r}: {exc}") from exc
    return fs, str(path)


def _uri_of(base_uri: str, base_path: str, path: str) -> str:
    return join(base_uri, posixpath.relpath(path, base_path))


def read_report(staging_uri: str) -> dict[str, Any] | None:
    fs, path = _fs(join(staging_uri, REPORT_NAME))
    try:
        with fs.open_input_stream(path) as stream:
            report: dict[str, Any] = json.loads(stream.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    return report


def parquet_files(staging_uri: str) -> list[DataFile]:
    """The data files of an attempt, sorted; hidden and side outputs (``_*``, ``.*``) are left out."""
    fs, base = _fs(staging_uri)
    found = []
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
        relative = posixpath.relpath(info.path, base)
        if info.type != pafs.FileType.File or not relative.endswith(".parquet"):
            continue
        if any(part.startswith(("_", ".")) for part in relative.split("/")):
            continue
        with fs.open_input_file(info.path) as handle:
            records = pq.ParquetFile(handle).metadata.num_rows
        modified = int(info.mtime.timestamp() * 1000) if info.mtime else 0
        found.append(DataFile(_uri_of(staging_uri, base, info.path), int(info.size or 0), records, modified))
    return sorted(found, key=lambda f: f.uri)


def subdirectories(uri: str) -> list[str]:
    fs, base = _fs(uri)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=False, allow_not_found=True))
    return sorted(_uri_of(uri, base, i.path) for i in infos if i.type == pafs.FileType.Directory)


def exists(uri: str) -> bool:
    fs, path = _fs(uri)
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def remove_tree(uri: str) -> None:
    """Remove a directory, and its parent once that is empty (an attempt, then its batch's directory)."""
    fs, path = _fs(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)
    parent = posixpath.dirname(path.rstrip("/"))
    if not fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True)):
        fs.delete_dir(parent)
