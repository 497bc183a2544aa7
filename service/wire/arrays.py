"""Safe readers of ``.npy`` and ``.npz`` request bodies.

``numpy.load`` trusts what it reads: a header may claim 10^12 elements (``MemoryError``), a
dtype may be ``object`` (pickle), a zip member may inflate without bound. These readers parse
the formats themselves and guarantee:

* ``read_npy``: the result is an array of an accepted dtype (bool, (u)int8-64, float16-64, in
  native byte order; fixed-width ``S``/``U`` strings only when asked for), with at most
  ``max_ndim`` dimensions (each at most ``MAX_DIMENSION`` long), whose byte size is exactly
  what the body holds after the header. It
  is a (read-only) view of the body, or one copy of it for a non-native byte order: nothing
  larger than the body is ever allocated, and nothing is ever unpickled.
* ``read_npz``: at most ``MAX_MEMBERS`` arrays, each a stored or deflated ``<key>.npy`` member
  read with ``read_npy``; the members together inflate to at most ``max_inflated`` bytes,
  checked against the declared sizes before anything is inflated and again while inflating, in
  bounded pieces (zip headers may lie). A stored member is read where its local header puts it
  in the body, as a view, after its size and CRC are checked.

Rejections: 400 (``BadRequest``) for bytes that do not parse, 413 (``PayloadTooLarge``) for an
archive over its inflation budget, 422 (``InvalidInput``) for well-formed content Sift does not
accept (a dtype, a dimension, an archive with too many or foreign members). Every detail says
what was expected and what came.
"""

from __future__ import annotations

import io
import math
import re
import struct
import zipfile
import zlib
from typing import Any

import numpy as np

from service.errors import BadRequest, InvalidInput, PayloadTooLarge, SiftError, shown
from service.wire.literals import literal

MAGIC = b"\x93NUMPY"
#: Longest ``.npy`` header accepted: numpy's own default limit for untrusted files. A header
#: Sift accepts (a dtype string, a flag and at most a few integers) takes well under 200 bytes.
MAX_HEADER_LENGTH = 10_000
#: Longest axis of an array Sift reads (numpy refuses 2^63 even in a shape of no bytes, such as
#: ``(2**63, 0)``; no chunk has 2^40 rows or features).
MAX_DIMENSION = 2**40
#: Most arrays in one ``.npz``: a sparse matrix has 5 or 6, a multi-view chunk one per view.
MAX_MEMBERS = 64
#: Zip compression methods read: stored and deflate, what numpy writes. Python's zipfile inflates
#: a read of a bzip2 or LZMA member whole, beyond any bound the reader sets: a 1 KB member can
#: take gigabytes.
INFLATABLE = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
#: Bytes inflated at a time when reading a zip member.
READ_PIECE = 1 << 16
#: Accepted numeric dtypes: kind -> item sizes in bytes. No complex, no longdouble/float128
#: (both would need a lossy conversion), no object, void, datetime or timedelta.
NUMERIC_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}
STRING_KINDS = "SU"
HEADER_KEYS = {"descr", "fortran_order", "shape"}
#: A member's key: what ``numpy.savez`` writes for keyword arrays (and view names allow).
MEMBER_NAME = re.compile(r"([A-Za-z0-9._-]{1,128})\.npy")
#: What the zip machinery raises on damaged or unsupported archives (not on Sift's own errors).
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,  # an unknown compression method
    RuntimeError,  # an encrypted member
    struct.error,
)


def read_npy(
    data: bytes | memoryview, *, allow_strings: bool = False, max_ndim: int = 2
) -> np.ndarray:
    """The array of a ``.npy`` body, parsed without ``np.load`` (see the module docstring)."""
    view = memoryview(data).cast("B")
    descr, fortran_order, shape, offset = _header(view)
    dtype = _dtype(descr, allow_strings)
    if not isinstance(fortran_order, bool):
        raise BadRequest(
            f".npy header 'fortran_order' must be True or False; got {fortran_order!r}"
        )
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise BadRequest(
            f".npy header 'shape' must be a tuple of non-negative integers; got {shown(shape)}"
        )
    if len(shape) > max_ndim:
        raise InvalidInput(
            f"expected an array of at most {max_ndim}-D; got shape {shown(shape)} ({len(shape)}-D)"
        )
    if any(n > MAX_DIMENSION for n in shape):
        raise InvalidInput(
            f"expected an array of at most {MAX_DIMENSION} entries along each axis; got shape "
            f"{shown(shape)}"
        )
    count = math.prod(shape)  # Python integers: a hostile shape cannot overflow
    expected = count * dtype.itemsize
    payload = len(view) - offset
    if payload != expected:
        raise BadRequest(
            f"the .npy header promises shape {shape} of {dtype.itemsize}-byte values "
            f"({expected} bytes) but the body holds {payload} bytes after the header"
        )
    flat = np.frombuffer(view, dtype=dtype, count=count, offset=offset)
    # Fortran order: the bytes are the transpose's C order.
    array = flat.reshape(shape[::-1]).T if fortran_order else flat.reshape(shape)
    if not dtype.isnative:
        # Big-endian data is legitimate (written on another machine): one copy, native order.
        array = array.astype(dtype.newbyteorder("="))
    return array


def _header(view: memoryview) -> tuple[Any, Any, Any, int]:
    """``descr``, ``fortran_order``, ``shape`` and where the data starts."""
    if len(view) < 10 or bytes(view[:6]) != MAGIC:
        raise BadRequest(
            f"body is not a valid .npy file: expected the magic {MAGIC!r}; got {bytes(view[:6])!r}"
        )
    version = (view[6], view[7])
    if version == (1, 0):
        (length,), start, encoding = struct.unpack_from("<H", view, 8), 10, "latin1"
    elif version in ((2, 0), (3, 0)):
        if len(view) < 12:
            raise BadRequest(f"body is not a valid .npy file: {len(view)} bytes")
        (length,), start = struct.unpack_from("<I", view, 8), 12
        encoding = "latin1" if version == (2, 0) else "utf8"
    else:
        raise BadRequest(
            f"body is not a valid .npy file: expected format version 1.0, 2.0 or 3.0; "
            f"got {version[0]}.{version[1]}"
        )
    if length > MAX_HEADER_LENGTH:
        raise BadRequest(f".npy header is {length} bytes; at most {MAX_HEADER_LENGTH} are accepted")
    if len(view) < start + length:
        raise BadRequest(
            f"body is not a valid .npy file: the header needs {length} bytes, "
            f"{len(view) - start} came"
        )
    try:
        text = bytes(view[start : start + length]).decode(encoding)
        # Literals only (no names, no calls), without Python's compiler (wire/literals.py says
        # why); the length is bounded.
        header = literal(text)
    except ValueError as exc:  # UnicodeDecodeError is one too
        raise BadRequest(f"body is not a valid .npy file: unreadable header ({exc})") from None
    if not isinstance(header, dict) or set(header) != HEADER_KEYS:
        got = sorted(map(repr, header)) if isinstance(header, dict) else type(header).__name__
        raise BadRequest(
            f".npy header must be a dict with exactly the keys descr, fortran_order and shape; "
            f"got {got}"
        )
    return header["descr"], header["fortran_order"], header["shape"], start + length


def _dtype(descr: Any, allow_strings: bool) -> np.dtype[Any]:
    """The dtype a header describes, if Sift accepts it; else a 422 naming it."""
    expected = "a numeric array (bool, int, uint or float16/32/64 dtype)"
    if allow_strings:
        expected = "a numeric or fixed-width string array"
    if not isinstance(descr, str):
        # numpy writes a list of fields for structured dtypes.
        raise InvalidInput(f"expected {expected}; got a structured dtype {str(descr)[:80]}")
    try:
        dtype = np.dtype(descr)  # a bounded string: parsed, never evaluated
    except (TypeError, ValueError, OverflowError, SyntaxError):
        raise InvalidInput(f"expected {expected}; got an unknown dtype {descr[:40]!r}") from None
    kind = dtype.kind
    if kind == "O":
        raise InvalidInput(
            "the .npy holds Python objects (dtype object) and would need pickle to load; "
            f"expected {expected}"
        )
    accepted = (
        dtype.fields is None
        and dtype.subdtype is None
        and (
            dtype.itemsize in NUMERIC_SIZES.get(kind, ())
            or (allow_strings and kind in STRING_KINDS and dtype.itemsize > 0)
        )
    )
    if not accepted:
        raise InvalidInput(f"expected {expected}; got dtype {dtype}")
    return dtype


def read_npz(
    body: bytes, max_inflated: int, *, allow_strings: bool = False, max_ndim: int = 2
) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` body by key, read safely (see the module docstring)."""
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise InvalidInput(
                    f"an .npz may hold at most {MAX_MEMBERS} arrays; got {len(members)} members"
                )
            for member in members:
                if member.compress_type not in INFLATABLE:
                    raise InvalidInput(
                        f"every member of an .npz must be stored or deflated (as numpy.savez and "
                        f"numpy.savez_compressed write them); '{member.filename[:80]}' uses zip "
                        f"compression method {member.compress_type}"
                    )
            keys = [_member_key(member.filename) for member in members]
            if len(set(keys)) != len(keys):
                raise InvalidInput(f"the .npz holds an array twice; got members {keys}")
            declared = sum(member.file_size for member in members)
            if declared > max_inflated:
                raise PayloadTooLarge(
                    f".npz inflates to {declared} bytes, more than the body limit of "
                    f"{max_inflated} bytes"
                )
            arrays = {}
            budget = max_inflated
            for key, member in zip(keys, members, strict=True):
                if member.compress_type == zipfile.ZIP_STORED:
                    raw: bytes | memoryview = _stored(body, member)
                else:
                    raw = _inflate(archive, member, budget)
                budget -= len(raw)
                try:
                    arrays[key] = read_npy(raw, allow_strings=allow_strings, max_ndim=max_ndim)
                except SiftError as exc:
                    raise type(exc)(f"array '{key}' of the .npz: {exc.detail}") from None
            return arrays
    except ZIP_ERRORS as exc:
        raise BadRequest(f"body is not a valid .npz archive: {exc}") from None


def _member_key(filename: str) -> str:
    match = MEMBER_NAME.fullmatch(filename)
    if match is None:
        raise InvalidInput(
            f"every member of an .npz must be an array named <key>.npy; got {filename[:80]!r}"
        )
    return match.group(1)


#: A zip local file header: its signature, then (after 22 bytes) the lengths of its name and of
#: its extra field; the member's data follows them.
_LOCAL_HEADER = struct.Struct("<4s22xHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"


def _stored(body: bytes, member: zipfile.ZipInfo) -> memoryview:
    """A stored member's bytes as a view of the body (what ``numpy.savez`` writes: no copy of
    a large array), where its local header puts them, checked against its size and CRC."""
    start = member.header_offset
    if member.flag_bits & 1:
        raise BadRequest(f"body is not a valid .npz archive: '{member.filename}' is encrypted")
    if not 0 <= start <= len(body) - _LOCAL_HEADER.size:
        raise BadRequest(
            f"body is not a valid .npz archive: '{member.filename}' has no local header"
        )
    signature, name_length, extra_length = _LOCAL_HEADER.unpack_from(body, start)
    begin = start + _LOCAL_HEADER.size + name_length + extra_length
    end = begin + member.compress_size
    if signature != _LOCAL_SIGNATURE or member.compress_size != member.file_size or end > len(body):
        raise BadRequest(
            f"body is not a valid .npz archive: '{member.filename}' does not lie where its "
            "headers say"
        )
    data = memoryview(body)[begin:end]
    if zlib.crc32(data) != member.CRC:
        raise BadRequest(f"body is not a valid .npz archive: '{member.filename}' fails its CRC")
    return data


def _inflate(archive: zipfile.ZipFile, member: zipfile.ZipInfo, budget: int) -> bytes:
    """A member's bytes, inflated in pieces, never beyond what its header declares nor beyond
    the budget. (zipfile itself stops at the declared size and then checks the CRC; these
    checks do not rely on it.)"""
    limit = min(member.file_size, budget)
    pieces = []
    size = 0
    with archive.open(member) as stream:
        while True:
            piece = stream.read(min(READ_PIECE, limit + 1 - size))
            if not piece:
                break
            size += len(piece)
            pieces.append(piece)
            if size > member.file_size:
                raise BadRequest(
                    f"body is not a valid .npz archive: '{member.filename}' inflates beyond "
                    f"the {member.file_size} bytes its header declares"
                )
            if size > budget:
                raise PayloadTooLarge(
                    f".npz inflates beyond the body limit while reading '{member.filename}'"
                )
    if size != member.file_size:
        raise BadRequest(
            f"body is not a valid .npz archive: '{member.filename}' declares "
            f"{member.file_size} bytes but inflates to {size}"
        )
    return b"".join(pieces)
