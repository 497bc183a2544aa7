"""Hostile request bodies, built byte by byte where numpy or scipy would refuse to write them."""

from __future__ import annotations

import ast
import io
import struct
import zipfile

import numpy as np


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npy_header(
    descr: str, shape: tuple[int, ...], payload: bytes = b"", order: bool = False
) -> bytes:
    """A version 1.0 ``.npy`` with any header at all (numpy checks nothing on the way out)."""
    header = repr({"descr": descr, "fortran_order": order, "shape": shape}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


def zip_of(members: dict[str, bytes], compress: bool = True) -> bytes:
    buffer = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def sparse_npz(fmt: str, shape: tuple[int, int], **parts: np.ndarray) -> bytes:
    """A ``scipy.sparse.save_npz`` archive with any parts (indices out of range included)."""
    members = {f"{key}.npy": npy(np.asarray(value)) for key, value in parts.items()}
    members["format.npy"] = npy(np.array(fmt.encode()))
    members["shape.npy"] = npy(np.array(shape))
    return zip_of(members)


def csc_out_of_range(row: int) -> bytes:
    """The segfault of the issue: a 3 x 4 CSC whose second stored value sits in ``row``."""
    return sparse_npz(
        "csc",
        (3, 4),
        data=np.array([1.0, 2.0]),
        indices=np.array([0, row]),
        indptr=np.array([0, 1, 2, 2, 2]),
    )


def lying_zip() -> bytes:
    """A zip whose central directory claims a tiny member that inflates to 20 MB."""
    real = zip_of({"data.npy": npy_header("<f8", (2_500_000,), b"\0" * 20_000_000)})
    # Patch the uncompressed size in the local header (offset 22) and central directory.
    patched = bytearray(real)
    small = struct.pack("<I", 128)
    patched[22:26] = small
    central = patched.rfind(b"PK\x01\x02")
    patched[central + 24 : central + 28] = small
    return bytes(patched)


def zip_bomb(size: int) -> bytes:
    return zip_of({"data.npy": npy_header("<f8", (size // 8,), b"\0" * size)})


def many_members(count: int) -> bytes:
    return zip_of({f"m{i}.npy": npy(np.zeros(1)) for i in range(count)})


def big_endian(array: np.ndarray) -> bytes:
    return npy(array.astype(array.dtype.newbyteorder(">")))


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def deep(depth: int) -> bytes:
    """A JSON value nested ``depth`` lists deep around a number: orjson parses it (up to 1024
    levels), while its own ``dumps`` and Python's ``repr`` give up at 255 and about 1000."""
    return b"[" * depth + b"1.0" + b"]" * depth


def json_with(template: str, **values: bytes) -> bytes:
    """``template`` (JSON) with each ``"@name@"`` replaced by the raw JSON ``values[name]``."""
    body = template.encode()
    for name, value in values.items():
        body = body.replace(f'"@{name}@"'.encode(), value)
    return body


def compressed_npz(method: int, size: int = 64) -> bytes:
    """An ``.npz`` of one ``.npy`` of ``size`` zero bytes in a zip member compressed with
    ``method`` (bzip2, LZMA: what numpy never writes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        archive.writestr("rows.npy", npy_header("<f8", (size // 8 // 4, 4), b"\0" * size))
    return buffer.getvalue()


def bzip2_bomb(size: int) -> bytes:
    """A bzip2 member of ``size`` zero bytes (256 MiB compress to about 200 bytes) whose
    headers declare 1 KiB: Python's zipfile inflates a read of it whole, beyond any bound."""
    real = bytearray(compressed_npz(zipfile.ZIP_BZIP2, size))
    declared = struct.pack("<I", 1024)
    real[22:26] = declared
    central = real.rfind(b"PK\x01\x02")
    real[central + 24 : central + 28] = declared
    return bytes(real)


def header_of(body: bytes) -> dict[str, object]:
    """The header dict of an ``.npy`` body (for the tests' own sanity checks)."""
    length = struct.unpack("<H", body[8:10])[0]
    parsed = ast.literal_eval(body[10 : 10 + length].decode())
    assert isinstance(parsed, dict)
    return parsed


def arrow_stream(columns: dict[str, object], compression: str | None = None) -> bytes:
    """An Arrow IPC stream of ``columns`` (pyarrow's own writer: a well-formed stream)."""
    import pyarrow as pa

    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
