"""Tables of named columns: ``text/csv`` and Arrow IPC stream bodies as a matrix, its column
names and, for labelled methods, the labels of a column named by the request (``?labels=``).

``text/csv``: a header line of column names (RFC 4180: quoted if need be), then one line per row
of comma-separated numbers (``1``, ``-2.5``, ``3e-7``; spaces around a number are ignored: the
grammar of every number written as text, ``service.wire.numbers``).
Lines may end with LF or CRLF; a UTF-8 byte-order mark at the start is skipped. Refused, with
what was expected and what came: an empty body, a header without rows, an empty line, a row
with another number of fields than the header, a quoted field in a row, a field that is not a
number (NaN and infinities parse, and are refused as every format refuses them, by
``rows.validate_rows``), more than ``MAX_CHUNK_ROWS`` rows. Empty lines, stray carriage
returns, quotes and the number of rows are found by searching and counting the bytes, so a body
is refused for them before anything per line is built; the fields per line are then counted a
block of the body at a time. The numbers are parsed by numpy's C reader (``numpy.loadtxt``),
never as one Python object per value; the label column, the one column read as text, gives one
label per row: an integer if it reads as one (``-?[0-9]+``, as ``sift push`` sends it), else
the string.

``application/vnd.apache.arrow.stream``: the Arrow IPC streaming format
(``pyarrow.ipc.new_stream``), one or more record batches; columns of integer or floating-point
types, the label column of integers or strings; no nulls, no dictionary-encoded columns, no
compressed batches (a compressed batch may inflate without bound). Every message, its framing,
its flatbuffer and every buffer its batches declare, is checked by Sift (``service.wire.ipc``)
before pyarrow reads a byte, the row count of each batch with it, so the matrix never exceeds
the body limit; pyarrow then validates each batch in full before its values are touched.
Arrow support needs ``pyarrow``, an optional dependency of the server (the ``arrow`` extra):
without it such a body is answered 415 saying so.

Either way the decoded matrix is at most ``max_bytes`` of float64 (a CSV of ``0,0,0,...``
holds four times its size in floats), checked before it is allocated; its rows and values are
then checked as every format's are (``rows.validate_rows``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.algorithms.labels import Label
from service.errors import BadRequest, Inconsistent, InvalidInput, UnsupportedMediaType, shown
from service.wire import ipc
from service.wire.media import ARROW, CSV
from service.wire.names import names_given
from service.wire.numbers import is_number

_INTEGER = re.compile(r"-?[0-9]+")
#: Most rows of one chunk, whatever its container, checked before anything of that many rows is
#: built: a table counts its lines first, a sparse shape is checked before its parts are (a CSC
#: or COO of shape (10^12, m) with no values would otherwise allocate a row pointer of 10^12
#: entries).
MAX_CHUNK_ROWS = 1_000_000
_BOM = b"\xef\xbb\xbf"
_NEWLINE, _COMMA = ord("\n"), ord(",")
#: Bytes of a CSV body scanned at once where a scan finds positions (8 bytes each).
_BLOCK = 1 << 20


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
    # Checked on the bytes as they are (searches and counts in C, nothing allocated): empty
    # lines, stray carriage returns, quotes, and the rows a body holds, so that the per-line
    # arrays below are built only for a body within the row limit and the size limit.
    blank = _first_blank_line(data)
    if blank is not None:
        raise InvalidInput(f"line {blank} of the CSV is empty: expected a row")
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
    rows = data.count(b"\n") + (not data.endswith(b"\n"))
    if rows > MAX_CHUNK_ROWS:
        raise InvalidInput(f"a chunk holds at most {MAX_CHUNK_ROWS} rows; got {rows}")
    _require_size(rows, len(features), max_bytes)
    buffer = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buffer == _NEWLINE)
    if len(ends) < rows:  # the last line without its newline
        ends = np.append(ends, len(data))
    commas = _commas_per_line(buffer, ends)
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


def _commas_per_line(buffer: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The commas of each line (``ends``: where each line ends), counted in C a block of the
    body at a time: the positions of one block's commas at most, never of all of them."""
    before = np.empty(len(ends), dtype=np.int64)  # the commas before each line's end
    seen = 0
    done = 0  # the lines whose end is counted
    for start in range(0, len(buffer), _BLOCK):
        stop = min(start + _BLOCK, len(buffer))
        positions = np.flatnonzero(buffer[start:stop] == _COMMA)
        upto = int(np.searchsorted(ends, stop))
        before[done:upto] = seen + np.searchsorted(positions, ends[done:upto] - start)
        seen += len(positions)
        done = upto
    before[done:] = seen
    return np.diff(before, prepend=0)


def _first_blank_line(data: bytes) -> int | None:
    """The number (the header is line 1) of the first empty line of the rows, a line of
    nothing or of a lone carriage return (None: none is)."""
    if data.startswith((b"\n", b"\r\n")):
        return 2
    found = [at for at in (data.find(b"\n\n"), data.find(b"\n\r\n")) if at >= 0]
    if not found:
        return None
    return data.count(b"\n", 0, min(found) + 1) + 2


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
            if column != at and not is_number(field):
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
    except (ipc.Malformed, pa.ArrowException, ValueError, TypeError, OSError, IndexError) as exc:
        # Sift's own words say where the stream broke; pyarrow's describe its internals.
        reason = f": {exc}" if isinstance(exc, ipc.Malformed) else ""
        raise BadRequest(
            f"the body is not a well-formed Arrow IPC stream ({ARROW}: a schema message, "
            f"then record batches, as pyarrow.ipc.new_stream writes them){reason}"
        ) from None


def _arrow_table(pa: Any, body: bytes, labels: str | None, max_bytes: int) -> Table:
    # Every message is checked by ``ipc`` before pyarrow reads a byte of the body.
    stream = ipc.Stream(body)
    header = names_given([column.name for column in stream.columns], "the Arrow schema's ")
    if header is None:  # pragma: no cover - a list is never None
        raise AssertionError
    features, at = _features(header, labels)
    for i, column in enumerate(stream.columns):
        _require_type(column, label=i == at)
    rows, batches = 0, 0
    nulls = [0] * len(header)
    for batch in stream.batches():
        rows += batch.rows
        batches += 1
        if rows > MAX_CHUNK_ROWS:
            raise InvalidInput(f"a chunk holds at most {MAX_CHUNK_ROWS} rows; got {rows}")
        _require_size(rows, len(features), max_bytes)
        nulls = [total + count for total, count in zip(nulls, batch.nulls, strict=True)]
    if rows == 0:
        raise InvalidInput("the Arrow stream holds no rows: expected at least one")
    for name, count in zip(header, nulls, strict=True):
        if count:
            raise InvalidInput(f"column {name!r} holds {count} nulls: expected none")
    messages = pa.ipc.MessageReader.open_stream(pa.py_buffer(body))
    schema = pa.ipc.read_schema(messages.read_next_message())
    if [(field.name, str(field.type)) for field in schema] != [
        (column.name, column.type) for column in stream.columns
    ]:
        raise ValueError("pyarrow reads another schema than the stream's")
    columns: list[list[Any]] = [[] for _ in header]
    for message in messages:
        batch = pa.ipc.read_record_batch(message, schema)
        batch.validate(full=True)
        for i, column in enumerate(batch.columns):
            columns[i].append(column)
    if len(columns[0]) != batches:
        raise ValueError("pyarrow reads another number of batches than the stream's")
    values = np.empty((rows, len(features)), dtype=np.float64)
    # A signalling NaN raises the invalid flag as it widens; it is refused as every NaN is.
    with np.errstate(invalid="ignore"):
        for j, i in enumerate(features):
            values[:, j] = pa.chunked_array(columns[i], schema[i].type).to_numpy()
    label_list = None
    if at is not None:
        label_list = pa.chunked_array(columns[at], schema[at].type).to_pylist()
    return Table(values, [header[i] for i in features], label_list)


def _require_type(column: ipc.Column, label: bool) -> None:
    if label:
        if column.kind not in ("int", "string"):
            raise InvalidInput(
                f"the label column {column.name!r} is {column.type}: expected integers or strings"
            )
    elif column.kind not in ("int", "float"):
        raise InvalidInput(
            f"column {column.name!r} is {column.type}: expected integers or floating-point numbers"
        )
