"""Log payloads: a chunk as the applier will see it, to bytes and back. Never pickle.

An unlabelled chunk is a matrix blob (``codec.encode_matrix``). A labelled chunk
(``LabelledRows``) is its own blob::

    offset  size  field
    0       8     magic b"SIFTLAB1"
    8       4     reserved, 0
    12      4     crc32 of this header (crc field read as 0) and the classes JSON
    16      8     length of the matrix blob
    24      8     length of the codes array blob (int64, one class index per row)
    32      8     length of the multiplicity array blob (int64 per row), 0 when absent
    40      8     length of the classes JSON (UTF-8 list of integers and strings)
    48            the four parts in that order, each padded with zeros to 8 bytes

The matrix and array parts carry their own checksums. A chunk of rows with a target
(``TargetRows``) is a blob of the same layout with two parts::

    offset  size  field
    0       8     magic b"SIFTTGT1"
    8       4     reserved, 0
    12      4     crc32 of this header (crc field read as 0)
    16      8     length of the matrix blob
    24      8     length of the targets array blob (float64, one per row)
    32            the two parts in that order, each padded with zeros to 8 bytes

What the log stores is that payload, or, when it saves at least a fifth, the payload compressed
(``pack_payload``: magic b"SIFTZLB1", the payload's length as u64, then zlib at level 1): term
counts and other low-entropy rows shrink two to four times, which is that much less for Redis to
receive, fsync and hold until a checkpoint covers it. Identity (idempotency digests) is always of
the uncompressed payload.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import numpy as np

from service.algorithms.base import Matrix
from service.algorithms.labels import LabelledRows
from service.algorithms.targets import TargetRows
from service.errors import CodecError
from service.store.codec import decode_array, decode_matrix, encode_array, encode_matrix

LABELLED_MAGIC = b"SIFTLAB1"
TARGET_MAGIC = b"SIFTTGT1"
ZLIB_MAGIC = b"SIFTZLB1"
_ZLIB_HEADER = struct.Struct("<8sQ")
#: Payloads smaller than this are stored as they are (compressing them saves too little).
COMPRESS_FROM_BYTES = 16 * 1024
_HEADER = struct.Struct("<8sIIQQQQ")
_TARGET_HEADER = struct.Struct("<8sIIQQ")


def _padded(parts: list[bytes]) -> list[bytes]:
    """The parts, each followed by the zeros that pad it to 8 bytes (joined once, no copy of a
    part on its own)."""
    out = []
    for part in parts:
        out += [part, b"\0" * (-len(part) % 8)]
    return out


def encode_chunk(chunk: Matrix | LabelledRows | TargetRows) -> bytes:
    """The log payload of a chunk: a matrix blob, or a labelled or target blob around one."""
    if isinstance(chunk, TargetRows):
        return _encode_targets(chunk)
    if not isinstance(chunk, LabelledRows):
        return encode_matrix(chunk)
    if chunk.codes.shape != (chunk.n_rows,):
        raise CodecError(
            f"expected one class code per row ({chunk.n_rows}); got {chunk.codes.shape}"
        )
    matrix = encode_matrix(chunk.rows)
    codes = encode_array(np.asarray(chunk.codes, dtype=np.int64))
    multiplicity = (
        b"" if chunk.multiplicity is None else encode_array(chunk.multiplicity.astype(np.int64))
    )
    classes = json.dumps(list(chunk.classes), separators=(",", ":")).encode()
    header = bytearray(
        _HEADER.pack(LABELLED_MAGIC, 0, 0, len(matrix), len(codes), len(multiplicity), len(classes))
    )
    struct.pack_into("<I", header, 12, zlib.crc32(classes, zlib.crc32(header)))
    return b"".join([bytes(header), *_padded([matrix, codes, multiplicity, classes])])


def _encode_targets(chunk: TargetRows) -> bytes:
    if chunk.targets.shape != (chunk.n_rows,):
        raise CodecError(f"expected one target per row ({chunk.n_rows}); got {chunk.targets.shape}")
    matrix = encode_matrix(chunk.rows)
    targets = encode_array(np.asarray(chunk.targets, dtype=np.float64))
    header = bytearray(_TARGET_HEADER.pack(TARGET_MAGIC, 0, 0, len(matrix), len(targets)))
    struct.pack_into("<I", header, 12, zlib.crc32(header))
    return b"".join([bytes(header), *_padded([matrix, targets])])


def pack_payload(payload: bytes) -> bytes:
    """What the log stores of ``payload``: compressed if that saves at least a fifth."""
    if len(payload) < COMPRESS_FROM_BYTES:
        return payload
    packed = zlib.compress(payload, 1)
    if len(packed) + _ZLIB_HEADER.size > 0.8 * len(payload):
        return payload
    return _ZLIB_HEADER.pack(ZLIB_MAGIC, len(payload)) + packed


def unpack_payload(stored: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """Inverse of :func:`pack_payload`; CodecError if a compressed payload is damaged or
    inflates to anything but its declared length (never more: no bomb)."""
    view = memoryview(stored).cast("B")
    if bytes(view[:8]) != ZLIB_MAGIC:
        return stored
    if len(view) < _ZLIB_HEADER.size:
        raise CodecError(f"compressed chunk too short: {len(view)} bytes")
    _magic, length = _ZLIB_HEADER.unpack_from(view, 0)
    inflater = zlib.decompressobj()
    try:
        payload = inflater.decompress(view[_ZLIB_HEADER.size :], length + 1)
    except zlib.error as exc:
        raise CodecError(f"compressed chunk does not inflate: {exc}") from exc
    if (
        len(payload) != length
        or not inflater.eof
        or inflater.unconsumed_tail
        or inflater.unused_data
    ):
        raise CodecError(f"compressed chunk inflates to other than its {length} bytes")
    return payload


def decode_chunk(blob: bytes | bytearray | memoryview) -> Matrix | LabelledRows | TargetRows:
    """Decode a log payload (:func:`encode_chunk`, maybe packed by :func:`pack_payload`);
    CodecError if it is neither kind."""
    view = memoryview(unpack_payload(blob)).cast("B")
    magic = bytes(view[:8])
    if magic == TARGET_MAGIC:
        return _decode_targets(view)
    if magic != LABELLED_MAGIC:
        return decode_matrix(view)
    _, reserved, crc, *lengths = _unpack_header(view, _HEADER, "labelled")
    matrix, codes, multiplicity, classes = _parts(view, _HEADER.size, lengths, "labelled")
    header = bytearray(view[: _HEADER.size])
    header[12:16] = b"\0\0\0\0"
    if reserved != 0 or zlib.crc32(classes, zlib.crc32(header)) != crc:
        raise CodecError("labelled chunk checksum mismatch")
    rows = decode_matrix(matrix)
    codes_array = decode_array(codes)
    labels = json.loads(bytes(classes))
    if (
        codes_array.shape != (rows.shape[0],)
        or codes_array.dtype != np.int64
        or (codes_array.size and not 0 <= codes_array.min() <= codes_array.max() < len(labels))
    ):
        raise CodecError("corrupt labelled chunk: class codes do not match the classes")
    counts = decode_array(multiplicity) if len(multiplicity) else None
    if counts is not None and counts.shape != (rows.shape[0],):
        raise CodecError("corrupt labelled chunk: one multiplicity per row expected")
    return LabelledRows(rows, tuple(labels), np.array(codes_array), counts)


def _decode_targets(view: memoryview) -> TargetRows:
    _, reserved, crc, *lengths = _unpack_header(view, _TARGET_HEADER, "target")
    matrix, targets = _parts(view, _TARGET_HEADER.size, lengths, "target")
    header = bytearray(view[: _TARGET_HEADER.size])
    header[12:16] = b"\0\0\0\0"
    if reserved != 0 or zlib.crc32(header) != crc:
        raise CodecError("target chunk checksum mismatch")
    rows = decode_matrix(matrix)
    values = decode_array(targets)
    if values.shape != (rows.shape[0],) or values.dtype != np.float64:
        raise CodecError("corrupt target chunk: one float64 target per row expected")
    return TargetRows(rows, np.array(values))


def _unpack_header(view: memoryview, header: struct.Struct, what: str) -> tuple[Any, ...]:
    if len(view) < header.size:
        raise CodecError(f"{what} chunk too short: {len(view)} bytes")
    return header.unpack_from(view, 0)


def _parts(view: memoryview, offset: int, lengths: list[int], what: str) -> list[memoryview]:
    """The parts of a blob after its header, each padded with zeros to 8 bytes."""
    parts = []
    for length in lengths:
        if offset + length > len(view):
            raise CodecError(f"{what} chunk truncated: {len(view)} bytes")
        parts.append(view[offset : offset + length])
        padding = view[offset + length : offset + length + (-length % 8)]
        if any(padding):
            raise CodecError(f"corrupt {what} chunk: non-zero padding")
        offset += length + (-length % 8)
    if offset != len(view):
        raise CodecError(f"corrupt {what} chunk: bad layout")
    return parts
