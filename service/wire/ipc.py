"""The Arrow IPC streaming format, read by Sift from the bytes before pyarrow sees any of them.

pyarrow trusts an IPC stream's metadata as a C++ program trusts its memory: a schema message
whose header says it is a record batch (two bytes changed in a valid stream) is read as a
schema, and the process dies of a segmentation fault. So every byte pyarrow will read is
checked here first, in Python, where a defect is an exception and never a crash:

* the framing (the encapsulated message format): each message is the continuation marker
  ``0xFFFFFFFF``, an int32 metadata length, a flatbuffer ``Message`` of that many bytes, then
  ``bodyLength`` bytes of body; the stream ends with the marker and a length of 0, or with its
  last body; nothing follows the end-of-stream marker. The pre-1.0 framing without the marker
  (``IpcWriteOptions(use_legacy_format=True)``) is refused;
* every flatbuffer as its verifier checks it: each table's vtable and inline size within the
  message's metadata, each field within its table, each offset, vector and string (with its
  terminating NUL) within the metadata, for every table pyarrow reads of a ``Message``, a
  ``Schema`` (its fields, their types, custom metadata and features) and a ``RecordBatch``;
* what the messages say: metadata version V4 or V5, a schema first and only record batches
  after it, little-endian, columns without children, integer widths of 8 to 64 bits and
  floating-point precisions pyarrow knows; for each batch a row count of 0 or more, one node
  per column of exactly that length with 0 to that many nulls, the buffers each column's
  layout has (validity and values; validity, offsets and bytes for strings), each within the
  body and as long as the rows need, the offsets of a string column non-decreasing from 0 or
  more to at most its bytes.

Refused as well-formed but not accepted (422): dictionary-encoded columns and dictionary
batches, compressed batches (they may inflate beyond the body limit), big-endian streams,
tensors. Which column types a chunk may hold is the caller's rule (``tables``): a column
reports its type, and a stream whose columns a caller refuses is never handed to pyarrow.
Checking costs a few microseconds per column per batch, none per value but a string column's
offsets (one numpy pass).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from service.errors import InvalidInput

#: The continuation marker that starts every message of the stream format.
CONTINUATION = 0xFFFFFFFF
#: ``MetadataVersion`` values pyarrow reads: V4 and V5.
_VERSIONS = frozenset({3, 4})
#: ``MessageHeader`` union: the kinds of message.
_SCHEMA, _DICTIONARY_BATCH, _RECORD_BATCH, _TENSOR, _SPARSE_TENSOR = 1, 2, 3, 4, 5
_MESSAGE_KINDS = {
    _SCHEMA: "schema",
    _DICTIONARY_BATCH: "dictionary batch",
    _RECORD_BATCH: "record batch",
    _TENSOR: "tensor",
    _SPARSE_TENSOR: "sparse tensor",
}
#: ``Type`` union members Sift reads (their tables are checked in full).
_INT, _FLOATING_POINT, _UTF8, _LARGE_UTF8 = 2, 3, 5, 20
#: The other members, by the names pyarrow gives them (only named in a refusal).
_OTHER_TYPES = {
    1: "null",
    4: "binary",
    6: "bool",
    7: "decimal",
    8: "date",
    9: "time",
    10: "timestamp",
    11: "interval",
    12: "list",
    13: "struct",
    14: "union",
    15: "fixed_size_binary",
    16: "fixed_size_list",
    17: "map",
    18: "duration",
    19: "large_binary",
    21: "large_list",
    22: "run_end_encoded",
    23: "binary_view",
    24: "string_view",
    25: "list_view",
    26: "large_list_view",
}
_FLOATS = {0: ("halffloat", 2), 1: ("float", 4), 2: ("double", 8)}
#: A ``FieldNode`` (length, null count) and a ``Buffer`` (offset, length): two int64 each.
_STRUCT_BYTES = 16

_U8, _I16, _U16, _I32, _U32, _I64 = (struct.Struct(f) for f in ("<B", "<h", "<H", "<i", "<I", "<q"))


class Malformed(ValueError):
    """The bytes are not a well-formed Arrow IPC stream; the message says where and what."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column of the schema: its name, its type as pyarrow names it, and its kind: ``"int"``,
    ``"float"``, ``"string"`` (``utf8`` or ``large_utf8``) or None (another type, which Sift
    refuses; its layout is not read). ``width``: bytes per value (per offset, for strings)."""

    name: str
    type: str
    kind: str | None
    width: int


@dataclass(frozen=True, slots=True)
class Batch:
    """A record batch as its message describes it, every part checked: its rows, and each
    column's nulls."""

    rows: int
    nulls: tuple[int, ...]


class Stream:
    """An Arrow IPC stream's messages, framed and checked: ``columns`` (the schema) on
    construction, each record batch as ``batches`` reaches it."""

    def __init__(self, body: bytes) -> None:
        self._body = body
        # Read a message at a time: a body of a million tiny messages never becomes a million
        # objects here.
        self._messages = _frames(body)
        first = next(self._messages, None)
        if first is None:
            raise Malformed("the stream ends before its schema")
        if first.kind != _SCHEMA:
            raise Malformed(
                f"the first message is a {_MESSAGE_KINDS[first.kind]}: expected the schema"
            )
        if first.body_length:
            raise Malformed("the schema message declares a body: a schema has none")
        self.columns = _schema(first.header)

    def batches(self) -> Iterator[Batch]:
        """Each record batch after the schema, checked against ``columns`` (whose kinds must
        all be known: a caller refuses the others first)."""
        if any(column.kind is None for column in self.columns):
            raise ValueError("a stream with columns of refused types has no batches to read")
        layout: _Layout | None = None
        for message in self._messages:
            if message.kind != _RECORD_BATCH:
                raise InvalidInput(
                    f"expected record batches after the schema; got a "
                    f"{_MESSAGE_KINDS[message.kind]} message (dictionary-encoded columns are "
                    "not accepted)"
                )
            if layout is None or not message.repeated:
                layout = _layout(message, self.columns)
            for column, offsets, data in layout.strings:
                _offsets(column, layout.rows, offsets, data, message.body_start, self._body)
            yield layout.batch


# -- flatbuffers --------------------------------------------------------------------------------


class _Flatbuffer:
    """One message's metadata: bytes ``[start, end)`` of the body, every read checked to lie
    within them."""

    __slots__ = ("data", "end", "start")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data, self.start, self.end = data, start, end

    def need(self, at: int, size: int) -> None:
        if at < self.start or at + size > self.end:
            raise Malformed(
                f"the metadata at byte {self.start} points to bytes {at}-{at + size}, beyond "
                f"its {self.end - self.start} bytes"
            )

    def read(self, kind: struct.Struct, at: int) -> int:
        if at < self.start or at + kind.size > self.end:
            self.need(at, kind.size)
        value: int = kind.unpack_from(self.data, at)[0]
        return value

    def root(self) -> _Table:
        return _Table(self, self.start + self.read(_U32, self.start))


class _Table:
    """A flatbuffer table whose vtable and inline bytes lie within its buffer."""

    __slots__ = ("at", "buffer", "size", "vtable", "vtable_size")

    def __init__(self, buffer: _Flatbuffer, at: int) -> None:
        self.buffer, self.at = buffer, at
        self.vtable = at - buffer.read(_I32, at)
        self.vtable_size = buffer.read(_U16, self.vtable)
        self.size = buffer.read(_U16, self.vtable + 2)
        if self.vtable_size < 4 or self.vtable_size % 2 or self.size < 4:
            raise Malformed(f"a flatbuffer table at byte {at} has a malformed vtable")
        buffer.need(self.vtable, self.vtable_size)
        buffer.need(at, self.size)

    def _slot(self, field: int, size: int) -> int | None:
        """Where field ``field`` (of ``size`` bytes) lies, None when it is absent."""
        entry = 4 + 2 * field
        if entry + 2 > self.vtable_size:
            return None
        offset = self.buffer.read(_U16, self.vtable + entry)
        if not offset:
            return None
        if offset + size > self.size:
            raise Malformed(f"a field of the flatbuffer table at byte {self.at} lies beyond it")
        return self.at + offset

    def scalar(self, field: int, kind: struct.Struct, default: int = 0) -> int:
        at = self._slot(field, kind.size)
        return default if at is None else self.buffer.read(kind, at)

    def _target(self, field: int) -> int | None:
        at = self._slot(field, 4)
        return None if at is None else at + self.buffer.read(_U32, at)

    def table(self, field: int) -> _Table | None:
        at = self._target(field)
        return None if at is None else _Table(self.buffer, at)

    def vector(self, field: int, item: int) -> tuple[int, int] | None:
        """Where a vector's items start and how many there are (None: absent)."""
        at = self._target(field)
        if at is None:
            return None
        count = self.buffer.read(_U32, at)
        self.buffer.need(at + 4, count * item)
        return at + 4, count

    def tables(self, field: int) -> Iterator[_Table]:
        """The tables of a vector of tables, one at a time."""
        found = self.vector(field, 4)
        if found is None:
            return
        start, count = found
        read, buffer = self.buffer.read, self.buffer
        for at in range(start, start + 4 * count, 4):
            yield _Table(buffer, at + read(_U32, at))

    def string(self, field: int) -> bytes | None:
        found = self.vector(field, 1)
        if found is None:
            return None
        start, length = found
        if self.buffer.read(_U8, start + length) != 0:
            raise Malformed(f"a string at byte {start} has no terminating NUL")
        return self.buffer.data[start : start + length]


def _key_values(table: _Table, field: int) -> None:
    """A ``[KeyValue]`` (custom metadata): each key and value a string within bounds."""
    for pair in table.tables(field):
        pair.string(0)
        pair.string(1)


# -- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Message:
    """A framed message: its kind, its header, where its body starts and how long it is, and
    whether its metadata repeats the previous message's byte for byte (a stream of equal
    batches: checked once)."""

    kind: int
    header: _Table
    body_start: int
    body_length: int
    repeated: bool


def _frames(body: bytes) -> Iterator[_Message]:
    """The stream's messages, each framed and its ``Message`` table checked."""
    at, end = 0, len(body)
    last: _Message | None = None
    last_metadata = b""
    while at < end:
        if end - at < 8:
            raise Malformed(f"the stream ends inside a message's prefix at byte {at}")
        if _U32.unpack_from(body, at)[0] != CONTINUATION:
            raise Malformed(
                f"expected the continuation marker 0xFFFFFFFF at byte {at} (streams in the "
                "pre-1.0 framing, use_legacy_format=True, are not accepted)"
            )
        length = _I32.unpack_from(body, at + 4)[0]
        if length == 0:
            if at + 8 != end:
                raise Malformed(f"{end - at - 8} bytes follow the end-of-stream marker")
            return
        if length < 0 or length > end - at - 8:
            raise Malformed(
                f"the message at byte {at} declares {length} bytes of metadata; "
                f"{end - at - 8} follow"
            )
        metadata_end = at + 8 + length
        metadata_bytes = body[at + 8 : metadata_end]
        if last is not None and metadata_bytes == last_metadata:
            message = _Message(last.kind, last.header, metadata_end, last.body_length, True)
        else:
            message = _message(_Flatbuffer(body, at + 8, metadata_end), at)
            last, last_metadata = message, metadata_bytes
        if message.body_length > end - metadata_end:
            raise Malformed(
                f"the message at byte {at} declares a body of {message.body_length} bytes; "
                f"{end - metadata_end} follow"
            )
        yield message
        at = metadata_end + message.body_length


def _message(metadata: _Flatbuffer, at: int) -> _Message:
    """The ``Message`` table of the message at byte ``at``, checked."""
    message = metadata.root()
    version = message.scalar(0, _I16)
    if version not in _VERSIONS:
        raise Malformed(
            f"the message at byte {at} has metadata version {version}: expected V4 or V5"
        )
    kind = message.scalar(1, _U8)
    header = message.table(2)
    if kind not in _MESSAGE_KINDS or header is None:
        raise Malformed(f"the message at byte {at} has no header of a known kind")
    body_length = message.scalar(3, _I64)
    _key_values(message, 4)
    if body_length < 0:
        raise Malformed(f"the message at byte {at} declares a body of {body_length} bytes")
    return _Message(kind, header, metadata.end, body_length, False)


def _schema(schema: _Table) -> tuple[Column, ...]:
    if schema.scalar(0, _I16) != 0:
        raise InvalidInput("the Arrow stream is big-endian: expected little-endian")
    columns = tuple(_column(field) for field in schema.tables(1))
    _key_values(schema, 2)
    schema.vector(3, 8)  # features: int64s
    return columns


def _column(field: _Table) -> Column:
    raw = field.string(0)
    try:
        name = (raw or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("a column's name is not UTF-8") from None
    field.scalar(1, _U8)  # nullable
    kind = field.scalar(2, _U8)
    type_table = field.table(3)
    if type_table is None:
        raise Malformed(f"column {name!r} has no type")
    if field.table(4) is not None:
        raise InvalidInput(f"column {name!r} is dictionary-encoded: expected plain columns")
    _key_values(field, 6)
    if kind in _OTHER_TYPES:
        return Column(name, _OTHER_TYPES[kind], None, 0)
    children = field.vector(5, 4)
    if children is not None and children[1]:
        raise Malformed(f"column {name!r} has children: its type has none")
    if kind == _INT:
        bits = type_table.scalar(0, _I32)
        signed = type_table.scalar(1, _U8)
        if bits not in (8, 16, 32, 64) or signed > 1:
            raise Malformed(f"column {name!r} is an integer of {bits} bits")
        return Column(name, f"{'' if signed else 'u'}int{bits}", "int", bits // 8)
    if kind == _FLOATING_POINT:
        precision = type_table.scalar(0, _I16)
        if precision not in _FLOATS:
            raise Malformed(f"column {name!r} has floating-point precision {precision}")
        type_name, width = _FLOATS[precision]
        return Column(name, type_name, "float", width)
    if kind == _UTF8:
        return Column(name, "string", "string", 4)
    if kind == _LARGE_UTF8:
        return Column(name, "large_string", "string", 8)
    raise Malformed(f"column {name!r} has type {kind}, which Arrow does not define")


@dataclass(frozen=True)
class _Layout:
    """What a record batch's metadata says, checked: the batch, and each string column's
    offsets and bytes buffers (read from the body of each batch with this metadata)."""

    batch: Batch
    strings: list[tuple[Column, tuple[int, int], tuple[int, int]]]

    @property
    def rows(self) -> int:
        return self.batch.rows


def _layout(message: _Message, columns: tuple[Column, ...]) -> _Layout:
    batch = message.header
    rows = batch.scalar(0, _I64)
    if rows < 0:
        raise Malformed(f"a record batch declares {rows} rows")
    if batch.table(3) is not None:
        raise InvalidInput(
            "compressed record batches are not accepted (they may inflate beyond the body "
            "limit): write the stream without IpcWriteOptions(compression=...)"
        )
    variadic = batch.vector(4, 8)
    if variadic is not None and variadic[1]:
        raise Malformed("a record batch declares variadic buffers: its columns have none")
    nodes = _structs(batch, 1, len(columns), "columns")
    buffers = _structs(batch, 2, sum(3 if c.kind == "string" else 2 for c in columns), "buffers")
    for offset, length in buffers:
        if offset < 0 or length < 0 or offset + length > message.body_length:
            raise Malformed(
                f"a record batch's buffer of {length} bytes at {offset} lies beyond its body "
                f"of {message.body_length} bytes"
            )
    nulls = []
    strings = []
    at = 0
    for column, (length, null_count) in zip(columns, nodes, strict=True):
        if length != rows or not 0 <= null_count <= rows:
            raise Malformed(
                f"column {column.name!r} of a batch of {rows} rows holds {length} values and "
                f"{null_count} nulls"
            )
        if null_count and buffers[at][1] < (rows + 7) // 8:
            raise Malformed(f"column {column.name!r}'s validity bitmap is short")
        if column.kind == "string":
            offsets = buffers[at + 1]
            if (rows or offsets[1]) and offsets[1] < (rows + 1) * column.width:
                raise Malformed(f"column {column.name!r}'s offsets are short of its rows")
            strings.append((column, offsets, buffers[at + 2]))
            at += 3
        else:
            if buffers[at + 1][1] < rows * column.width:
                raise Malformed(f"column {column.name!r}'s values are short of its rows")
            at += 2
        nulls.append(null_count)
    return _Layout(Batch(rows, tuple(nulls)), strings)


def _structs(table: _Table, field: int, count: int, what: str) -> list[tuple[int, int]]:
    """A vector of ``count`` ``FieldNode`` or ``Buffer`` structs (two int64 each), its length
    checked before anything of it is read."""
    found = table.vector(field, _STRUCT_BYTES)
    start, given = (0, 0) if found is None else found
    if given != count:
        raise Malformed(f"a record batch has {given} {what}; its schema's columns have {count}")
    values = struct.unpack_from(f"<{2 * count}q", table.buffer.data, start)
    return list(zip(values[::2], values[1::2], strict=True))


def _offsets(
    column: Column,
    rows: int,
    offsets: tuple[int, int],
    data: tuple[int, int],
    body_start: int,
    body: bytes,
) -> None:
    """A string column's offsets (``rows + 1`` of them, as ``_layout`` checked): non-decreasing,
    from 0 or more to at most its bytes."""
    if not rows and not offsets[1]:
        return
    read = np.frombuffer(
        body, dtype=f"<i{column.width}", count=rows + 1, offset=body_start + offsets[0]
    )
    if read[0] < 0 or read[-1] > data[1] or (rows and bool((np.diff(read) < 0).any())):
        raise Malformed(f"column {column.name!r}'s offsets do not lie within its bytes")
