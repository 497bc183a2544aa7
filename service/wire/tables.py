"""Tables of named columns: ``text/csv`` and Arrow IPC stream bodies as a matrix, its column
names and, for labelled methods, the labels of a column named by the request (``?labels=``).

``text/csv``: a header line of column names (RFC 4180: quoted if need be), then one line per row
of comma-separated numbers (``1``, ``-2.5``, ``3e-7``; spaces around a number are ignored).
Lines may end with LF or CRLF; a UTF-8 byte-order mark at the start is skipped. Refused, with
what was expected and what came: an empty body, a header without rows, an empty line, a row
with another number of fields than the header, a quoted field in a row, a field that is not a
number (NaN and infinities parse, and are refused as every format refuses them, by
``rows.validate_rows``). The numbers are parsed by numpy's C reader (``numpy.loadtxt``), never
as one Python object per value; the label column, the one column read as text, gives one
label per row: an integer if it reads as one (``-?[0-9]+``, as ``sift push`` sends it), else
the string.

``application/vnd.apache.arrow.stream``: the Arrow IPC streaming format
(``pyarrow.ipc.new_stream``), one or more record batches; columns of integer or floating-point
types, the label column of integers or strings; no nulls, no dictionary-encoded columns, no
compressed batches (a compressed batch may inflate without bound). Every batch's row count is
read from its message before the batch is, so the matrix never exceeds the body limit, and
every batch is validated in full before its values are touched. Arrow support needs
``pyarrow``, an optional dependency of the server (the ``arrow`` extra): without it such a body
is answered 415 saying so.

Either way the decoded matrix is at most ``max_bytes`` of float64 (a CSV of ``0,0,0,...``
holds four times its size in floats), checked before it is allocated; its rows and values are
then checked as every format's are (``rows.validate_rows``).
"""

from __future__ import annotations

import csv
import io
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.algorithms.labels import Label
from service.errors import BadRequest, Inconsistent, InvalidInput, UnsupportedMediaType, shown
from service.wire.media import ARROW, CSV
from service.wire.names import names_given

#: What a field of a CSV row may be, as ``numpy.loadtxt`` reads it: used only to name the field
#: it refused (it parses the same set).
_NUMBER = re.compile(
    r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)\s*", re.IGNORECASE
)
_INTEGER = re.compile(r"-?[0-9]+")
_BOM = b"\xef\xbb\xbf"
_NEWLINE, _COMMA = ord("\n"), ord(",")


@dataclass(frozen=True)
class Table:
    """A body's columns: the feature values (rows x features, float64), the features' names
    in the body's order, and the label column's labels (None: no label column)."""

    values: np.ndarray
    names: list[str]
    labels: list[Label] | None


def read_table(body: bytes, media_type: str, labels: str | None, max_bytes: int) -> Table:
    """The table of a ``text/csv`` or Arrow stream body, fully validated but for the values'
    magnitudes (``validate_rows``); ``labels`` names the label column, if the rows have one."""
    if not body:
        raise InvalidInput(
            "empty body: expected a header of column names, then at least one row"
            if media_type == CSV
            else "empty body: expected an Arrow IPC stream with at least one row"
        )
    if media_type == CSV:
        return _read_csv(body, labels, max_bytes)
    if media_type == ARROW:
        return _read_arrow(body, labels, max_bytes)
    raise UnsupportedMediaType(f"unsupported media type '{media_type}'")  # pragma: no cover


def _features(header: list[str], labels: str | None) -> tuple[list[int], int | None]:
    """Positions of the feature columns, and of the label column (None: no labels)."""
    if labels is None:
        return list(range(len(header))), None
    if labels not in header:
        raise Inconsistent(
            f"labels={labels!r} names no column of the chunk; its columns are {shown(header, 200)}"
        )
    at = header.index(labels)
    if len(header) == 1:
        raise InvalidInput(f"the chunk has only the label column {labels!r}: expected features")
    return [i for i in range(len(header)) if i != at], at


def _require_size(rows: int, features: int, max_bytes: int) -> None:
    if rows * features * 8 > max_bytes:
        raise InvalidInput(
            f"{rows} rows x {features} features are {rows * features * 8} bytes of float64, "
            f"beyond the body limit of {max_bytes} bytes: send fewer rows per chunk"
        )


def label_of(text: str) -> Label:
    """A label as text gives it: the integer it spells, or the string."""
    return int(text) if _INTEGER.fullmatch(text) else text


# -- CSV ----------------------------------------------------------------------------------------


def _read_csv(body: bytes, labels: str | None, max_bytes: int) -> Table:
    if body.startswith(_BOM):
        body = body[len(_BOM) :]
    head, newline, data = body.partition(b"\n")
    header = _header(head.removesuffix(b"\r"))
    if not newline or not data.strip(b"\r\n"):
        raise InvalidInput(
            f"the CSV has a header ({len(header)} columns) and no rows: expected at least one "
            "row after it"
        )
    features, at = _features(header, labels)
    buffer = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buffer == _NEWLINE)
    if not len(ends) or ends[-1] != len(data) - 1:  # the last line without its newline
        ends = np.append(ends, len(data))
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts
    blank = np.flatnonzero((lengths == 0) | ((lengths == 1) & (buffer[starts] == ord("\r"))))
    if len(blank):
        raise InvalidInput(f"line {int(blank[0]) + 2} of the CSV is empty: expected a row")
    if data.count(b"\r") != data.count(b"\r\n"):
        line = data.count(b"\n", 0, data.index(b"\r")) + 2
        raise InvalidInput(
            f"line {line} of the CSV holds a carriage return that ends no line: lines end "
            "with LF or CRLF"
        )
    if b'"' in data:
        line = data.count(b"\n", 0, data.index(b'"')) + 2
        raise InvalidInput(
            f"line {line} of the CSV holds a quoted field: rows are plain numbers (and plain "
            "labels); only the header may quote names"
        )
    _require_size(len(starts), len(features), max_bytes)
    # Fields per line, counted in C: the commas before each line's end, less those before the
    # previous line's.
    commas = np.diff(
        np.searchsorted(np.flatnonzero(buffer == _COMMA), ends, side="right"), prepend=0
    )
    ragged = np.flatnonzero(commas != len(header) - 1)
    if len(ragged):
        line = int(ragged[0])
        raise Inconsistent(
            f"the CSV is ragged: the header has {len(header)} columns but line {line + 2} has "
            f"{int(commas[line]) + 1} fields"
        )
    if not data.isascii():
        _utf8(data)  # refused before parsing; the parser decodes as it reads
    try:
        # Read as a file, a block at a time: no copy of the body as one string (a StringIO of
        # it would hold four bytes per character).
        values = np.loadtxt(
            io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"),
            delimiter=",",
            comments=None,
            dtype=np.float64,
            ndmin=2,
            usecols=features,
        )
    except ValueError:
        raise _not_a_number(_utf8(data), header, at) from None
    labels_read = None if at is None else _csv_labels(_utf8(data), at, len(header))
    return Table(values, [header[i] for i in features], labels_read)


def _header(line: bytes) -> list[str]:
    # Only an empty line is no header: a name of spaces is a name, as it is in a JSON chunk.
    if not line.rstrip(b"\r\n"):
        raise InvalidInput("the CSV's first line is empty: expected a header of column names")
    try:
        header = next(csv.reader([_utf8(line)], strict=True))
    except csv.Error as exc:
        raise BadRequest(f"the CSV's header does not parse: {exc}") from None
    names = names_given(header, "the CSV header's ")
    if names is None:  # pragma: no cover - a list is never None
        raise AssertionError
    return names


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(
            f"a CSV body is UTF-8 text; byte {exc.start} is not UTF-8 "
            f"({data[exc.start : exc.start + 4]!r})"
        ) from None


def _not_a_number(text: str, header: list[str], at: int | None) -> InvalidInput:
    """The refusal of the first field ``numpy.loadtxt`` could not read (found again here, off
    the fast path)."""
    for line, row in enumerate(io.StringIO(text)):
        for column, field in enumerate(row.rstrip("\r\n").split(",")):
            if column != at and not _NUMBER.fullmatch(field):
                return InvalidInput(
                    f"expected numbers in every feature column; line {line + 2}, column "
                    f"{header[column]!r} is {shown(field)}"
                )
    return InvalidInput("expected numbers in every feature column of the CSV")  # pragma: no cover


def _csv_labels(text: str, at: int, width: int) -> list[Label]:
    """The label column's fields, one per line, each split off from the nearer end of its line
    (the rest left unsplit: a few Python objects per row, not one per value)."""
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    after = width - 1 - at
    if at <= after:
        return [label_of(line.split(",", at + 1)[at].strip()) for line in lines]
    return [label_of(line.rsplit(",", after + 1)[1].strip()) for line in lines]


# -- Arrow --------------------------------------------------------------------------------------


def _read_arrow(body: bytes, labels: str | None, max_bytes: int) -> Table:
    try:
        import pyarrow as pa
    except ImportError:
        raise UnsupportedMediaType(
            f"{ARROW} needs pyarrow, which this server does not have: install the server "
            "with its arrow extra (pip install 'siftstream-server[arrow]'), or send text/csv, "
            "application/x-npy, application/x-npz or JSON"
        ) from None
    if body.startswith(b"ARROW1"):
        raise InvalidInput(
            f"the body is an Arrow IPC file (.arrow, .feather); {ARROW} is the streaming "
            "format: write it with pyarrow.ipc.new_stream"
        )
    try:
        return _arrow_table(pa, body, labels, max_bytes)
    except (
        pa.ArrowException,
        ValueError,
        TypeError,
        OSError,
        IndexError,
        StopIteration,
        struct.error,
    ):
        # pyarrow's own words describe its internals; the client is told what was expected.
        raise BadRequest(
            f"the body is not a well-formed Arrow IPC stream ({ARROW}: a schema message, "
            "then record batches, as pyarrow.ipc.new_stream writes them)"
        ) from None


def _arrow_table(pa: Any, body: bytes, labels: str | None, max_bytes: int) -> Table:
    messages = pa.ipc.MessageReader.open_stream(pa.py_buffer(body))
    schema = pa.ipc.read_schema(messages.read_next_message())
    header = names_given([field.name for field in schema], "the Arrow schema's ")
    if header is None:  # pragma: no cover - a list is never None
        raise AssertionError
    features, at = _features(header, labels)
    for i, field in enumerate(schema):
        _require_type(pa, field, label=i == at)
    columns: list[list[Any]] = [[] for _ in header]
    rows = 0
    for message in messages:
        if message.type != "record batch":
            raise InvalidInput(
                f"expected record batches after the schema; got a {message.type} message "
                "(dictionary-encoded columns are not accepted)"
            )
        length, compressed = _batch_header(bytes(message.metadata))
        if compressed:
            raise InvalidInput(
                "compressed record batches are not accepted (they may inflate beyond the body "
                "limit): write the stream without IpcWriteOptions(compression=...)"
            )
        rows += length
        _require_size(rows, len(features), max_bytes)
        batch = pa.ipc.read_record_batch(message, schema)
        # pyarrow trusts a batch's buffers as the message describes them: a malformed one is
        # read out of bounds (it crashed the process) unless checked in full first.
        batch.validate(full=True)
        for i, column in enumerate(batch.columns):
            columns[i].append(column)
    if rows == 0:
        raise InvalidInput("the Arrow stream holds no rows: expected at least one")
    for i, parts in enumerate(columns):
        nulls = sum(part.null_count for part in parts)
        if nulls:
            raise InvalidInput(f"column {header[i]!r} holds {nulls} nulls: expected none")
    values = np.empty((rows, len(features)), dtype=np.float64)
    for j, i in enumerate(features):
        values[:, j] = pa.chunked_array(columns[i]).to_numpy()
    label_list = None
    if at is not None:
        label_list = pa.chunked_array(columns[at]).to_pylist()
    return Table(values, [header[i] for i in features], label_list)


def _require_type(pa: Any, field: Any, label: bool) -> None:
    kind = field.type
    if pa.types.is_dictionary(kind):
        raise InvalidInput(
            f"column {field.name!r} is dictionary-encoded ({kind}): expected plain columns"
        )
    if label:
        if not (
            pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
        ):
            raise InvalidInput(
                f"the label column {field.name!r} is {kind}: expected integers or strings"
            )
    elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise InvalidInput(
            f"column {field.name!r} is {kind}: expected integers or floating-point numbers"
        )


def _batch_header(metadata: bytes) -> tuple[int, bool]:
    """A record batch message's row count and whether its body is compressed, read from its
    flatbuffer (``Message.header`` is a ``RecordBatch``: ``length`` is field 0, ``compression``
    field 3) before pyarrow allocates anything for it."""
    message = _table(metadata, struct.unpack_from("<I", metadata, 0)[0])
    header_at = _field(metadata, message, 2)
    if header_at is None:
        raise ValueError("a record batch message without its header")
    batch = _table(metadata, header_at + struct.unpack_from("<I", metadata, header_at)[0])
    length_at = _field(metadata, batch, 0)
    length = 0 if length_at is None else struct.unpack_from("<q", metadata, length_at)[0]
    if length < 0:
        raise ValueError("a negative row count")
    return length, _field(metadata, batch, 3) is not None


def _table(buffer: bytes, at: int) -> tuple[int, int]:
    """A flatbuffer table: its position and its vtable's."""
    return at, at - struct.unpack_from("<i", buffer, at)[0]


def _field(buffer: bytes, table: tuple[int, int], index: int) -> int | None:
    """Where field ``index`` of a flatbuffer table lies (None: absent)."""
    at, vtable = table
    size = struct.unpack_from("<H", buffer, vtable)[0]
    if 4 + 2 * index + 2 > size:
        return None
    offset = struct.unpack_from("<H", buffer, vtable + 4 + 2 * index)[0]
    return at + offset if offset else None
