"""The unencoded sizes of a Parquet file's byte-array columns, read from its footer's Thrift.

Parquet 2.10's ``SizeStatistics`` give, per column chunk, the bytes of its BYTE_ARRAY values before any
encoding or compression (without their length prefixes): for a batch's ``key`` and ``value`` columns, exactly
the key + value bytes of the records the file holds. parquet-java writes them from 1.14 (Spark 4.0 and later);
Arrow reads them but does not expose them to Python, so this reads them itself: the footer is Thrift's compact
protocol, and only ``FileMetaData.row_groups[].columns[].meta_data`` (its ``path_in_schema`` and
``size_statistics.unencoded_byte_array_data_bytes``) is decoded; every other field is skipped by its type.

Plain Python (standard library only): the worker reads the footers of a Spark Connect batch with it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

MAGIC = b"PAR1"
# Enough for the footer of a batch's file in one read (Arrow reads 64 KiB too); a larger one takes a second.
TAIL_BYTES = 64 * 1024

# Thrift compact protocol's type ids.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
_VARINTS = (_I16, _I32, _I64)
_FIXED_WIDTH = {_BYTE: 1, _DOUBLE: 8}

# Field ids of parquet.thrift on the path read.
_FILE_ROW_GROUPS = 4
_ROW_GROUP_COLUMNS = 1
_CHUNK_META_DATA = 3
_META_PATH_IN_SCHEMA = 3
_META_SIZE_STATISTICS = 16
_SIZE_UNENCODED_BYTES = 1


class FooterError(ValueError):
    """The bytes are not a Parquet footer this reader understands."""


def read_footer(size: int, read_at: Callable[[int, int], bytes]) -> bytes:
    """A file's footer (its Thrift ``FileMetaData``), from ``read_at(length, offset)`` over a file of ``size``
    bytes: one read of the file's tail, a second only for a footer larger than :data:`TAIL_BYTES`."""
    if size < 12:
        raise FooterError(f"{size} bytes is too short for a Parquet file")
    tail = bytes(read_at(min(size, TAIL_BYTES), size - min(size, TAIL_BYTES)))
    if tail[-4:] != MAGIC:
        raise FooterError("the file does not end with PAR1 (not Parquet, or an encrypted footer)")
    length = struct.unpack("<I", tail[-8:-4])[0]
    if length + 12 > size:
        raise FooterError(f"a footer of {length} bytes in a file of {size}")
    if length + 8 <= len(tail):
        return tail[-8 - length : -8]
    return bytes(read_at(length, size - 8 - length))


def as_metadata_file(footer: bytes) -> bytes:
    """The footer as a file of its own (a ``_metadata`` file's form), which any Parquet reader opens."""
    return MAGIC + footer + struct.pack("<I", len(footer)) + MAGIC


def unencoded_sizes(footer: bytes) -> list[dict[str, int | None]]:
    """Per row group: each column's (dotted path) unencoded byte-array bytes, None where not recorded."""
    reader = _Compact(footer)
    groups: list[dict[str, int | None]] = []
    try:
        for field, kind in reader.fields():
            if field == _FILE_ROW_GROUPS and kind == _LIST:
                groups = [_row_group(reader) for _ in reader.elements(_STRUCT)]
            else:
                reader.skip(kind)
    except (IndexError, struct.error) as exc:
        raise FooterError(f"a truncated Parquet footer ({len(footer)} bytes)") from exc
    return groups


def _row_group(reader: _Compact) -> dict[str, int | None]:
    sizes: dict[str, int | None] = {}
    for field, kind in reader.fields():
        if field == _ROW_GROUP_COLUMNS and kind == _LIST:
            for _ in reader.elements(_STRUCT):
                path, size = _column_chunk(reader)
                if path is not None:
                    sizes[path] = size
        else:
            reader.skip(kind)
    return sizes


def _column_chunk(reader: _Compact) -> tuple[str | None, int | None]:
    path: str | None = None
    size: int | None = None
    for field, kind in reader.fields():
        if field == _CHUNK_META_DATA and kind == _STRUCT:
            path, size = _column_meta_data(reader)
        else:
            reader.skip(kind)
    return path, size


def _column_meta_data(reader: _Compact) -> tuple[str | None, int | None]:
    path: str | None = None
    size: int | None = None
    for field, kind in reader.fields():
        if field == _META_PATH_IN_SCHEMA and kind == _LIST:
            path = ".".join(reader.binary().decode("utf-8") for _ in reader.elements(_BINARY))
        elif field == _META_SIZE_STATISTICS and kind == _STRUCT:
            for inner, inner_kind in reader.fields():
                if inner == _SIZE_UNENCODED_BYTES and inner_kind == _I64:
                    size = reader.zigzag()
                else:
                    reader.skip(inner_kind)
        else:
            reader.skip(kind)
    return path, size


class _Compact:
    """A reader of Thrift's compact protocol over bytes: the caller walks the fields it wants."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def binary(self) -> bytes:
        length = self.varint()
        if self.pos + length > len(self.data):
            raise IndexError("binary past the end")
        value = self.data[self.pos : self.pos + length]
        self.pos += length
        return value

    def fields(self) -> Iterator[tuple[int, int]]:
        """A struct's (field id, type), up to its stop; the caller reads or skips each value."""
        field = 0
        while True:
            header = self.byte()
            kind = header & 0x0F
            if kind == _STOP:
                return
            delta = header >> 4
            field = field + delta if delta else self.zigzag()
            yield field, kind

    def elements(self, expected: int) -> Iterator[None]:
        """A list's elements, one step each (the caller reads each); a list of another type is skipped."""
        header = self.byte()
        size = header >> 4
        if size == 15:
            size = self.varint()
        kind = header & 0x0F
        for _ in range(size):
            if kind == expected:
                yield None
            else:
                self.skip(kind, in_list=True)

    def skip(self, kind: int, in_list: bool = False) -> None:
        if kind in (_TRUE, _FALSE):  # a struct field's boolean is its header; a list's takes a byte
            self.pos += 1 if in_list else 0
        elif kind in _FIXED_WIDTH:
            self.pos += _FIXED_WIDTH[kind]
        elif kind in _VARINTS:
            self.varint()
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            for _ in self.elements(-1):
                pass
        elif kind == _MAP:
            self._skip_map()
        elif kind == _STRUCT:
            for _, inner in self.fields():
                self.skip(inner)
        else:
            raise FooterError(f"unknown Thrift compact type {kind} at byte {self.pos}")
        if self.pos > len(self.data):
            raise IndexError("past the end")

    def _skip_map(self) -> None:
        size = self.varint()
        if size:
            types = self.byte()
            for _ in range(size):
                self.skip(types >> 4, in_list=True)
                self.skip(types & 0x0F, in_list=True)
