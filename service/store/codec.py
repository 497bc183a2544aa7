"""State codec: numpy arrays, matrices and method states <-> bytes. Never pickle.

Array blob (all integers little-endian)::

    offset  size      field
    0       8         magic b"SIFTARR1"
    8       1         length of the dtype string (1..8)
    9       1         ndim (0..64)
    10      2         flags: 0, or ZEROS (1): every element is 0 and the payload is left out
    12      4         crc32 of the whole blob with this field read as 0 (header + payload)
    16      len       dtype string, ASCII, e.g. b"<f8", b"|b1"
    ...     8*ndim    shape, uint64 each (aligned to 8)
    ...               zero padding up to a multiple of 8
    H       n         payload: the array's raw C-order little-endian bytes

The checksum covers the header as well as the payload, so a corrupt shape of an empty array is
caught too. A state that has learned nothing yet (a new selector's, all zeros) is written with
``ZEROS`` blobs: a header each, whatever its size, so that a selector's Redis footprint grows
with what it has learned, not with what it declared at its creation. Decoded arrays are
**read-only views** of the input buffer (no copy; copy them with ``np.array(a)`` before
mutating). The header is padded so the payload is 8-byte aligned.

Matrix blob: magic b"SIFTMAT1", kind (0 dense, 1 CSR), reserved, component count, crc32 of the
matrix header, rows and columns, the component lengths; then each component as an array blob
padded to 8 bytes. Dense: one 2-D array. CSR: data, indices, indptr.

State: every array is one hash field (array blob); every scalar goes into one JSON field
``__scalars__``. Names starting with ``__`` are reserved for the codec and the store.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.errors import CodecError

ARRAY_MAGIC = b"SIFTARR1"
MATRIX_MAGIC = b"SIFTMAT1"
SCALARS_FIELD = "__scalars__"

#: Exactly the dtype strings an array blob may carry.
ALLOWED_DTYPES = frozenset(
    {"|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f4", "<f8"}
)
MAX_NDIM = 64
_MAX_DTYPE_LEN = 8

_ARRAY_FIXED = struct.Struct("<8sBBHI")  # magic, dtype length, ndim, reserved, crc32
_MATRIX_FIXED = struct.Struct("<8sBBHIQQ")  # magic, kind, ncomp, reserved, crc32, rows, cols
#: The flag of an array blob whose elements are all 0, stored without its payload.
ZEROS = 1
_KIND_DENSE = 0
_KIND_CSR = 1

Scalar = int | float | str | bool | None


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def _le_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The little-endian twin of an allowed dtype; CodecError for anything else."""
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biuf":
        raise CodecError(
            f"cannot encode arrays of dtype {dtype}: expected bool, (u)int8-64, float32 or float64"
        )
    le = dtype.newbyteorder("<")
    if le.str not in ALLOWED_DTYPES:
        raise CodecError(
            f"cannot encode arrays of dtype {dtype}: expected bool, (u)int8-64, float32 or float64"
        )
    return le


def encode_array(a: np.ndarray | np.generic, elide_zeros: bool = False) -> bytes:
    """Encode one array (any layout or byte order) as a self-checking blob; with
    ``elide_zeros``, an array of zeros as a ``ZEROS`` header alone."""
    return b"".join(_array_parts(a, elide_zeros))


def _array_parts(a: np.ndarray | np.generic, elide_zeros: bool = False) -> tuple[bytes, memoryview]:
    """An array's blob (``encode_array``) as its header and its payload: a view of the array's
    own bytes where it is C-ordered and little-endian, not a copy."""
    if isinstance(a, np.generic):
        a = np.asarray(a)
    if not isinstance(a, np.ndarray):
        raise CodecError(f"expected a numpy array, got {type(a).__name__}")
    if a.ndim > MAX_NDIM:
        raise CodecError(f"arrays may have at most {MAX_NDIM} dimensions, got {a.ndim}")
    dtype = _le_dtype(a.dtype)
    arr = np.asarray(a, dtype=dtype, order="C")  # ascontiguousarray would make 0-d arrays 1-d
    dtype_str = dtype.str.encode("ascii")
    header_len = _pad8(_ARRAY_FIXED.size + len(dtype_str) + 8 * arr.ndim)
    header = bytearray(header_len)
    _ARRAY_FIXED.pack_into(header, 0, ARRAY_MAGIC, len(dtype_str), arr.ndim, 0, 0)
    offset = _ARRAY_FIXED.size
    header[offset : offset + len(dtype_str)] = dtype_str
    offset += len(dtype_str)
    struct.pack_into(f"<{arr.ndim}Q", header, offset, *arr.shape)
    payload = arr.reshape(-1).data.cast("B")
    if elide_zeros and arr.size and not arr.any():
        struct.pack_into("<H", header, 10, ZEROS)
        payload = memoryview(b"")
    crc = zlib.crc32(payload, zlib.crc32(header))
    struct.pack_into("<I", header, 12, crc)
    return bytes(header), payload


@dataclass(frozen=True)
class _ArrayHeader:
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    flags: int
    crc: int
    length: int

    @property
    def nbytes(self) -> int:
        """Bytes of the array it describes, decoded (a ``ZEROS`` blob's too)."""
        return math.prod(self.shape) * self.dtype.itemsize


def _array_header(view: memoryview) -> _ArrayHeader:
    if len(view) < _ARRAY_FIXED.size:
        raise CodecError(f"array blob too short: {len(view)} bytes, header needs 16")
    magic, dtype_len, ndim, flags, crc = _ARRAY_FIXED.unpack_from(view, 0)
    if magic != ARRAY_MAGIC:
        raise CodecError(f"not an array blob: magic {bytes(magic)!r}, expected {ARRAY_MAGIC!r}")
    if not 1 <= dtype_len <= _MAX_DTYPE_LEN or ndim > MAX_NDIM or flags not in (0, ZEROS):
        raise CodecError(
            f"corrupt array header: dtype length {dtype_len}, ndim {ndim}, flags {flags}"
        )
    shape_at = _ARRAY_FIXED.size + dtype_len
    header_len = _pad8(shape_at + 8 * ndim)
    if len(view) < header_len:
        raise CodecError(f"array blob truncated: {len(view)} bytes, header needs {header_len}")
    dtype_str = bytes(view[_ARRAY_FIXED.size : shape_at]).decode("ascii", "replace")
    if dtype_str not in ALLOWED_DTYPES:
        raise CodecError(f"array blob has dtype {dtype_str!r}, expected one of the allowed dtypes")
    shape = struct.unpack_from(f"<{ndim}Q", view, shape_at)
    if any(view[shape_at + 8 * ndim : header_len]):
        raise CodecError("corrupt array header: non-zero padding")
    return _ArrayHeader(np.dtype(dtype_str), tuple(shape), flags, crc, header_len)


def array_nbytes(b: bytes | bytearray | memoryview) -> int:
    """Bytes of the array blob ``b`` describes once decoded, from its header alone (a
    ``ZEROS`` blob is small and its array need not be); CodecError if it is not one."""
    return _array_header(memoryview(b).cast("B")).nbytes


def stored_nbytes(field: bytes) -> int:
    """Bytes a state field takes decoded: an array blob's array (``array_nbytes``), else the
    field itself (the scalars' JSON)."""
    return array_nbytes(field) if field[: len(ARRAY_MAGIC)] == ARRAY_MAGIC else len(field)


def decode_array(b: bytes | bytearray | memoryview) -> np.ndarray:
    """Decode a blob of :func:`encode_array` into a read-only view; CodecError if it is not one."""
    view = memoryview(b).cast("B")
    header = _array_header(view)
    dtype, shape, flags, header_len = header.dtype, header.shape, header.flags, header.length
    dtype_str, crc = dtype.str, header.crc
    expected = 0 if flags == ZEROS else header.nbytes
    if len(view) - header_len != expected:
        raise CodecError(
            f"array payload has {len(view) - header_len} bytes, shape {tuple(shape)} of "
            f"{dtype_str} needs {expected}"
        )
    check = zlib.crc32(view[:12])
    check = zlib.crc32(b"\0\0\0\0", check)
    check = zlib.crc32(view[16:], check)
    if check != crc:
        raise CodecError(
            f"array blob checksum mismatch: stored {crc:#010x}, computed {check:#010x}"
        )
    if flags == ZEROS:
        try:
            zeros = np.zeros(shape, dtype=dtype)  # calloc: pages are touched when written
        except (ValueError, MemoryError) as exc:
            raise CodecError(
                f"array blob of zeros, shape {tuple(shape)}, does not load: {exc}"
            ) from exc
        zeros.flags.writeable = False
        return zeros
    try:
        out = np.frombuffer(view, dtype=dtype, count=math.prod(shape), offset=header_len)
        out = out.reshape(shape)
    except (ValueError, OverflowError) as exc:
        raise CodecError(f"array blob with shape {tuple(shape)} does not load: {exc}") from exc
    out.flags.writeable = False
    return out


def encode_matrix(m: np.ndarray | sp.csr_matrix | sp.csr_array) -> bytes:
    """Encode a dense 2-D array or a CSR matrix (``csr_matrix`` or ``csr_array``) as one blob."""
    components: list[bytes]
    if isinstance(m, np.ndarray):
        if m.ndim != 2:
            raise CodecError(f"expected a 2-D matrix, got an array with {m.ndim} dimensions")
        kind, shape = _KIND_DENSE, m.shape
        components = [encode_array(m)]
    elif sp.issparse(m) and m.format == "csr":
        if len(m.shape) != 2:
            raise CodecError(f"expected a 2-D sparse matrix, got shape {m.shape}")
        kind, shape = _KIND_CSR, m.shape
        # 32-bit indices whenever they fit (as scipy itself chooses): a third less to log.
        index_type = np.int32 if max(m.shape[1], m.nnz) < 2**31 else np.int64
        components = [
            encode_array(m.data),
            encode_array(m.indices.astype(index_type, copy=False)),
            encode_array(m.indptr.astype(index_type, copy=False)),
        ]
    else:
        raise CodecError(
            f"expected a dense 2-D ndarray or a scipy.sparse CSR matrix, got {type(m).__name__}"
            " (convert sparse matrices with .tocsr())"
        )
    lengths = struct.pack(f"<{len(components)}Q", *(len(c) for c in components))
    fixed = bytearray(_MATRIX_FIXED.pack(MATRIX_MAGIC, kind, len(components), 0, 0, *shape))
    crc = zlib.crc32(lengths, zlib.crc32(fixed))
    struct.pack_into("<I", fixed, 12, crc)
    parts: list[bytes] = [bytes(fixed), lengths]
    for c in components:
        parts.append(c)
        parts.append(b"\0" * (_pad8(len(c)) - len(c)))
    return b"".join(parts)


def decode_matrix(b: bytes | bytearray | memoryview) -> np.ndarray | sp.csr_matrix:
    """Decode a blob of :func:`encode_matrix`.

    Dense matrices come back as read-only views; CSR matrices as ``csr_matrix`` owning writable
    copies of their arrays (scipy canonicalises them in place).
    """
    view = memoryview(b).cast("B")
    if len(view) < _MATRIX_FIXED.size:
        raise CodecError(f"matrix blob too short: {len(view)} bytes")
    magic, kind, ncomp, reserved, crc, rows, cols = _MATRIX_FIXED.unpack_from(view, 0)
    if magic != MATRIX_MAGIC:
        raise CodecError(f"not a matrix blob: magic {bytes(magic)!r}, expected {MATRIX_MAGIC!r}")
    expected_ncomp = {_KIND_DENSE: 1, _KIND_CSR: 3}.get(kind)
    if expected_ncomp is None or ncomp != expected_ncomp or reserved != 0:
        raise CodecError(f"corrupt matrix header: kind {kind}, {ncomp} components")
    lengths_end = _MATRIX_FIXED.size + 8 * ncomp
    if len(view) < lengths_end:
        raise CodecError(f"matrix blob truncated: {len(view)} bytes")
    check = zlib.crc32(view[:12])
    check = zlib.crc32(b"\0\0\0\0", check)
    check = zlib.crc32(view[16:lengths_end], check)
    if check != crc:
        raise CodecError("matrix header checksum mismatch")
    lengths = struct.unpack_from(f"<{ncomp}Q", view, _MATRIX_FIXED.size)
    offset = lengths_end
    arrays = []
    for length in lengths:
        end = offset + length
        if end > len(view):
            raise CodecError(f"matrix blob truncated: {len(view)} bytes, needs at least {end}")
        arrays.append(decode_array(view[offset:end]))
        padded = offset + _pad8(length)
        if padded > len(view) or any(view[end:padded]):
            raise CodecError("corrupt matrix blob: bad padding")
        offset = padded
    if offset != len(view):
        raise CodecError(f"matrix blob has {len(view) - offset} trailing bytes")
    if kind == _KIND_DENSE:
        (dense,) = arrays
        if dense.shape != (rows, cols):
            raise CodecError(f"dense matrix has shape {dense.shape}, header says {(rows, cols)}")
        return dense
    data, indices, indptr = arrays
    if indices.dtype.kind != "i" or indptr.dtype.kind != "i":
        raise CodecError(f"CSR index arrays must be integers, got {indices.dtype}, {indptr.dtype}")
    if data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1:
        raise CodecError("CSR component arrays must be 1-D")
    try:
        out = sp.csr_matrix(
            (np.array(data), np.array(indices), np.array(indptr)), shape=(rows, cols), copy=False
        )
        out.check_format(full_check=True)
    except (ValueError, TypeError, OverflowError) as exc:
        raise CodecError(f"CSR matrix blob is inconsistent: {exc}") from exc
    return out


def _check_field_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise CodecError(f"state field names must be non-empty strings, got {name!r}")
    if name.startswith("__"):
        raise CodecError(f"state field names must not start with '__', got {name!r}")
    return name


def _scalar(name: str, value: object) -> Scalar:
    if isinstance(value, np.generic):
        if value.dtype.kind not in "biuf":
            raise CodecError(f"state scalar {name!r} has unsupported dtype {value.dtype}")
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"state scalar {name!r} must be finite, got {value!r}")
        return value
    raise CodecError(
        f"state field {name!r} must be a numpy array or an int/float/str/bool/None scalar, "
        f"got {type(value).__name__}"
    )


def encode_state(state: Mapping[str, Any], elide_zeros: bool = False) -> dict[str, bytes]:
    """One field per array, all scalars in one JSON field ``__scalars__``.

    numpy scalars (``np.float64(1.5)``) are stored as Python scalars; NaN/inf scalars are rejected
    (store them in a 0-d array if a method really needs them). ``elide_zeros``: arrays of zeros
    as ``ZEROS`` blobs (a new selector's state; checking costs a pass over each array, which a
    commit does not pay).
    """
    return {name: b"".join(parts) for name, parts in _state_parts(state, elide_zeros).items()}


def _state_parts(
    state: Mapping[str, Any], elide_zeros: bool = False
) -> dict[str, tuple[bytes, memoryview]]:
    """``encode_state``'s fields, each as a head and a body (an array's header and a view of
    its bytes; the scalars' JSON and nothing)."""
    fields: dict[str, tuple[bytes, memoryview]] = {}
    scalars: dict[str, Scalar] = {}
    for name, value in state.items():
        _check_field_name(name)
        if isinstance(value, np.ndarray):
            fields[name] = _array_parts(value, elide_zeros)
        else:
            scalars[name] = _scalar(name, value)
    text = json.dumps(scalars, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    fields[SCALARS_FIELD] = (text.encode("utf-8"), memoryview(b""))
    return fields


_FIELDS_MAGIC = b"SIFTFLD1"
_FIELDS_HEADER = struct.Struct("<8sII")  # magic, count, crc32 of the names and lengths


def pack_fields(fields: Mapping[str, bytes]) -> bytes:
    """Named byte fields (an encoded state, say) as one self-checking blob.

    Layout: magic ``SIFTFLD1``, the number of fields, a crc32 of the table; the table (per field
    its UTF-8 name length (u32), name, and value length (u64)); then the values in order. Each
    value is an array blob or the scalars' JSON, which carry their own checks.
    """
    table = bytearray()
    for name, value in fields.items():
        encoded = name.encode("utf-8")
        table += struct.pack("<I", len(encoded)) + encoded + struct.pack("<Q", len(value))
    header = _FIELDS_HEADER.pack(_FIELDS_MAGIC, len(fields), zlib.crc32(table))
    return b"".join([header, bytes(table), *fields.values()])


def unpack_fields(blob: bytes | bytearray | memoryview) -> dict[str, bytes]:
    """Inverse of :func:`pack_fields`; CodecError if ``blob`` is not one."""
    view = memoryview(blob).cast("B")
    if len(view) < _FIELDS_HEADER.size:
        raise CodecError(f"fields blob too short: {len(view)} bytes")
    magic, count, crc = _FIELDS_HEADER.unpack_from(view, 0)
    if magic != _FIELDS_MAGIC:
        raise CodecError(f"not a fields blob: magic {bytes(magic)!r}")
    offset = _FIELDS_HEADER.size
    layout: list[tuple[str, int]] = []
    try:
        for _ in range(count):
            (name_length,) = struct.unpack_from("<I", view, offset)
            name = bytes(view[offset + 4 : offset + 4 + name_length]).decode("utf-8")
            (length,) = struct.unpack_from("<Q", view, offset + 4 + name_length)
            layout.append((name, length))
            offset += 12 + name_length
    except (struct.error, UnicodeDecodeError) as exc:
        raise CodecError(f"fields blob table is damaged: {exc}") from exc
    if zlib.crc32(view[_FIELDS_HEADER.size : offset]) != crc:
        raise CodecError("fields blob table checksum mismatch")
    out: dict[str, bytes] = {}
    for name, length in layout:
        if offset + length > len(view):
            raise CodecError(f"fields blob truncated at field {name!r}")
        out[name] = bytes(view[offset : offset + length])
        offset += length
    if offset != len(view):
        raise CodecError(f"fields blob has {len(view) - offset} trailing bytes")
    return out


def _reject_constant(token: str) -> float:
    raise CodecError(f"state scalars contain {token}, which is never written")


def decode_state(
    fields: Mapping[str, bytes | memoryview] | Mapping[bytes, bytes],
) -> dict[str, Any]:
    """Inverse of :func:`encode_state`. Other ``__``-prefixed fields (store bookkeeping) are
    ignored; a state without ``__scalars__`` simply has no scalars."""
    out: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    items: Iterable[tuple[str | bytes, bytes | memoryview]] = fields.items()
    for raw_name, value in items:
        try:
            name = raw_name.decode("utf-8") if isinstance(raw_name, bytes) else raw_name
        except UnicodeDecodeError as exc:
            raise CodecError(f"state field name {raw_name!r} is not UTF-8") from exc
        if name == SCALARS_FIELD:
            try:
                parsed = json.loads(bytes(value), parse_constant=_reject_constant)
            except (ValueError, UnicodeDecodeError) as exc:
                raise CodecError(f"state scalars do not parse as JSON: {exc}") from exc
            if not isinstance(parsed, dict) or not all(
                v is None or isinstance(v, bool | int | float | str) for v in parsed.values()
            ):
                raise CodecError("state scalars must be a JSON object of scalars")
            scalars = parsed
        elif name.startswith("__"):
            continue
        else:
            out[name] = decode_array(value)
    for name, value in scalars.items():
        if name in out:
            raise CodecError(f"state field {name!r} is both an array and a scalar")
        out[name] = value
    return out


#: A checkpoint cuts every encoded field into pieces of at most this many bytes, each written by
#: its own Redis command: Redis serves other clients between two pieces (and, with
#: ``appendfsync always``, fsyncs each piece's few hundred KiB rather than one whole state).
PIECE_BYTES = 256 * 1024
#: The manifest of a cut state: JSON ``{field: number of pieces}`` for the fields that were cut.
PIECES_FIELD = "__pieces__"
_PIECE_PREFIX = "__piece:"


def piece_name(field: str, index: int) -> str:
    """The hash field of piece ``index`` of ``field`` (``__``-prefixed: never a state field)."""
    return f"{_PIECE_PREFIX}{index}:{field}"


def cut_fields(
    fields: Mapping[str, bytes], piece_bytes: int = PIECE_BYTES
) -> dict[str, bytes | memoryview]:
    """Encoded fields with every value over ``piece_bytes`` cut into pieces (and a manifest).

    Pieces are views of the values, not copies (a large state is not copied twice): array
    blobs carry their own checksum, so a piece lost or swapped is caught when the joined value
    decodes.
    """
    return _cut({field: (value,) for field, value in fields.items()}, piece_bytes)


def cut_state(
    state: Mapping[str, Any], piece_bytes: int = PIECE_BYTES
) -> dict[str, bytes | memoryview]:
    """``cut_fields(encode_state(state))`` without joining any array into a blob of its own:
    an array's pieces are views of the array (but the first, its header and first bytes). A
    checkpoint of a wide state so never copies it whole: a copy of tens of MB is one C call
    that holds the GIL (~0.25 s for 85 MB, the new buffer's page faults included) while every
    other request of the process waits. The state's arrays must stay as they are until the
    pieces are written (states are replaced, never changed in place)."""
    return _cut(_state_parts(state), piece_bytes)


def _cut(
    fields: Mapping[str, Sequence[bytes | memoryview]], piece_bytes: int
) -> dict[str, bytes | memoryview]:
    """Fields, each the concatenation of its parts, with every value over ``piece_bytes`` cut
    into pieces of that size, and the manifest. A value that fits is kept as it is (joined, if
    in parts); a piece within one part is a view of it, one across parts a copy of a piece."""
    out: dict[str, bytes | memoryview] = {}
    counts: dict[str, int] = {}
    for field, parts in fields.items():
        size = sum(len(part) for part in parts)
        if size <= piece_bytes:
            out[field] = parts[0] if len(parts) == 1 else b"".join(parts)
            continue
        views = [memoryview(part).cast("B") for part in parts if len(part)]
        count = 0
        piece: list[memoryview] = []
        wanted = piece_bytes
        for view in views:
            while len(view):
                taken, view = view[:wanted], view[wanted:]
                piece.append(taken)
                wanted -= len(taken)
                if not wanted:
                    out[piece_name(field, count)] = _joined(piece)
                    count, piece, wanted = count + 1, [], piece_bytes
        if piece:
            out[piece_name(field, count)] = _joined(piece)
            count += 1
        counts[field] = count
    out[PIECES_FIELD] = json.dumps(counts, separators=(",", ":")).encode("ascii")
    return out


def _joined(views: list[memoryview]) -> bytes | memoryview:
    return views[0] if len(views) == 1 else b"".join(views)


def join_fields(stored: Mapping[str, bytes | memoryview]) -> dict[str, bytes | memoryview]:
    """Inverse of :func:`cut_fields` and :func:`cut_state`: the encoded fields, pieces joined
    in order (a field of several pieces as a read-only view of the buffer they were copied
    into, ``_joined_pieces``).

    ``stored`` is what Redis gives back (bytes) or what ``cut_fields`` made (pieces as views);
    ``bytes()`` of a value that is already bytes is that value, not a copy.
    CodecError if the manifest is missing or damaged or a piece is missing. Other
    ``__``-prefixed fields (store bookkeeping) are dropped.
    """
    raw_manifest = stored.get(PIECES_FIELD)
    if raw_manifest is None:
        raise CodecError("checkpoint has no manifest of its pieces")
    try:
        counts = json.loads(bytes(raw_manifest))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"checkpoint manifest does not parse: {exc}") from exc
    if not isinstance(counts, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts.values()
    ):
        raise CodecError("checkpoint manifest must map fields to piece counts")
    out: dict[str, bytes | memoryview] = {
        field: bytes(value)
        for field, value in stored.items()
        if not field.startswith("__") or field == SCALARS_FIELD
    }
    for field, count in counts.items():
        try:
            out[field] = _joined_pieces([stored[piece_name(field, i)] for i in range(count)])
        except KeyError as exc:
            raise CodecError(f"checkpoint piece {exc.args[0]!r} is missing") from exc
    return out


def _joined_pieces(pieces: list[bytes | memoryview]) -> bytes | memoryview:
    """Pieces as one read-only buffer, copied a piece at a time into memory taken untouched:
    tens of MB are never one copy (one C call holding the GIL, page faults and all, while the
    process's other requests wait)."""
    if len(pieces) == 1:
        return bytes(pieces[0])
    joined = np.empty(sum(len(piece) for piece in pieces), dtype=np.uint8)
    at = 0
    for piece in pieces:
        joined[at : at + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
        at += len(piece)
    joined.flags.writeable = False
    return joined.data
