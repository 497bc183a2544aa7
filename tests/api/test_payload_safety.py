"""Hostile bodies against the real app: each gets its 4xx problem and changes nothing.

The bodies are built byte by byte where numpy or scipy would refuse to write them: sparse
matrices with indices out of range (a CSC of these crashed scipy's conversion), ``.npy``
headers that lie about their size or dtype, zip archives that lie about their members, nested
JSON, and values beyond ``MAX_ABS_VALUE`` in every container and on every route that takes rows
or columns.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms.base import MAX_ABS_VALUE
from service.wire.arrays import MAX_MEMBERS
from service.wire.rows import MAX_CHUNK_ROWS, decode_rows
from tests.support.api import (
    assert_problem,
    assert_untouched,
    create_selector,
    csr_json,
    npy_bytes,
    npz_bytes,
    npz_labelled,
)

pytestmark = pytest.mark.asyncio

M = 4
NPY = {"content-type": "application/x-npy"}
NPZ = {"content-type": "application/x-npz"}
LIMIT = f"{MAX_ABS_VALUE:g}"


# -- bodies ------------------------------------------------------------------------------------


def raw_npy(array: np.ndarray) -> bytes:
    """``numpy.save`` with pickle allowed: object arrays as an attacker would send them."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npy_header(
    descr: Any,
    shape: Any,
    payload: bytes = b"",
    fortran_order: Any = False,
    version: tuple[int, int] = (1, 0),
    **extra: Any,
) -> bytes:
    """A ``.npy`` with any header at all (numpy checks nothing on the way out)."""
    header = repr({"descr": descr, "fortran_order": fortran_order, "shape": shape, **extra})
    encoded = header.encode() + b"\n"
    size = struct.pack("<H" if version == (1, 0) else "<I", len(encoded))
    return b"\x93NUMPY" + bytes(version) + size + encoded + payload


def zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def stored_zip(members: dict[str, bytes]) -> bytes:
    """A zip of stored members, as ``numpy.savez`` writes them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def damaged_stored_zip(where: str) -> bytes:
    """A stored ``.npz`` of one good array with a byte of its data flipped (``data``: its CRC
    fails), or its central directory pointing its local header elsewhere (``offset``)."""
    member = raw_npy(np.ones((2, 4)))
    patched = bytearray(stored_zip({"data.npy": member}))
    if where == "data":
        patched[len(patched) // 3] ^= 0x01
    else:
        central = patched.rfind(b"PK\x01\x02")
        patched[central + 42 : central + 46] = struct.pack("<I", 7)
    return bytes(patched)


def sparse_npz(fmt: str, shape: tuple[int, int], **parts: Any) -> bytes:
    """A ``scipy.sparse.save_npz`` archive with any parts and shape."""
    members = {f"{key}.npy": raw_npy(np.asarray(value)) for key, value in parts.items()}
    members["format.npy"] = raw_npy(np.array(fmt.encode()))
    members["shape.npy"] = raw_npy(np.array(shape))
    return zip_of(members)


def csc(
    indices: Any,
    indptr: Any = (0, 1, 2, 2, 2),
    data: Any = (1.0, 2.0),
    shape: tuple[int, int] = (3, M),
) -> bytes:
    """The matrix of the issue: 3 x 4 CSC with two values, the second in row ``indices[1]``."""
    return sparse_npz("csc", shape, data=data, indices=np.asarray(indices), indptr=indptr)


def csr(indices: Any, indptr: Any, data: Any = None, shape: tuple[int, int] = (1, M)) -> bytes:
    data = np.ones(len(indices)) if data is None else data
    return sparse_npz("csr", shape, data=data, indices=np.asarray(indices), indptr=indptr)


def coo(row: Any, col: Any, data: Any = None, shape: tuple[int, int] = (2, M)) -> bytes:
    data = np.ones(len(row)) if data is None else data
    return sparse_npz("coo", shape, data=data, row=np.asarray(row), col=np.asarray(col))


def lying_zip(crc_too: bool) -> bytes:
    """A zip whose headers claim 128 bytes for a member that inflates to 20,000, with the CRC of
    the whole member, or (``crc_too``) of its first 128 bytes: reading stops at the declared
    size, so the CRC fails, or the member is a truncated ``.npy``."""
    real_member = npy_header("<f8", (2500,), b"\0" * 20_000)
    patched = bytearray(zip_of({"data.npy": real_member}))
    small = struct.pack("<I", 128)
    crc = struct.pack("<I", zlib.crc32(real_member[:128]))
    central = patched.rfind(b"PK\x01\x02")
    patched[22:26] = small  # local header: uncompressed size
    patched[central + 24 : central + 28] = small  # central directory: uncompressed size
    if crc_too:
        patched[14:18] = crc
        patched[central + 16 : central + 20] = crc
    return bytes(patched)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
async def selector(client):
    await create_selector(client, "s", M, params={"k": 2})
    return client


async def post_chunk(client, body: dict[str, Any], name: str = "s"):
    return await client.post(f"/v1/selectors/{name}/chunks", **body)


def npz(content: bytes) -> dict[str, Any]:
    return {"content": content, "headers": NPZ}


def npy(content: bytes) -> dict[str, Any]:
    return {"content": content, "headers": NPY}


# -- sparse matrices scipy must never see unchecked ----------------------------------------------

SPARSE_CASES = [
    # (id, body, fragment)
    ("csc-row-far-out", csc([0, 1_000_000]), "CSC row index 1000000 is out of range [0, 3)"),
    ("csc-row-one-past", csc([0, 3]), "CSC row index 3 is out of range [0, 3)"),
    ("csc-row-negative", csc([0, -1]), "CSC row index -1 is out of range"),
    ("csc-indptr-decreasing", csc([0, 1], [0, 2, 1, 2, 2]), "non-decreasing"),
    ("csc-indptr-short", csc([0, 1], [0, 1, 2]), "columns + 1 = 5 entries; got 3"),
    ("csc-indptr-not-at-0", csc([0, 1], [1, 1, 2, 2, 2]), "start at 0"),
    ("csc-indptr-end", csc([0, 1], [0, 1, 1, 1, 1]), "indptr[-1]"),
    ("csc-data-length", csc([0, 1], data=np.ones(3)), "same length"),
    ("csc-float-indices", csc([0.0, 1.0]), "CSC 'indices' must be a 1-D integer array"),
    ("csc-bool-indices", csc([False, True]), "dtype bool"),
    ("csc-2d-indices", csc([[0, 1]]), "1-D"),
    ("csc-huge-rows", csc([0, 1], shape=(10**12, M)), f"at most {MAX_CHUNK_ROWS} rows"),
    ("csr-column-far-out", csr([10**6], [0, 1]), "CSR column index 1000000 is out of range"),
    ("csr-column-one-past", csr([M], [0, 1]), f"CSR column index {M} is out of range [0, {M})"),
    ("csr-column-negative", csr([-1], [0, 1]), "CSR column index -1 is out of range"),
    ("csr-float-indices", csr([0.5], [0, 1]), "must be a 1-D integer array; got dtype float64"),
    ("csr-float-indptr", csr([0], [0.0, 1.0]), "CSR 'indptr' must be a 1-D integer array"),
    ("csr-indptr-length", csr([0], [0, 1, 1]), "rows + 1 = 2 entries; got 3"),
    ("csr-string-data", csr([0], [0, 1], np.array(["x"])), "'data' must be a 1-D numeric"),
    ("csr-huge-uint-index", csr(np.array([2**64 - 1], np.uint64), [0, 1]), "beyond 64-bit"),
    ("coo-row-far-out", coo([10**6], [0]), "COO row index 1000000 is out of range [0, 2)"),
    ("coo-row-one-past", coo([2], [0]), "COO row index 2 is out of range [0, 2)"),
    ("coo-col-one-past", coo([0], [M]), f"COO column index {M} is out of range [0, {M})"),
    ("coo-col-negative", coo([0], [-3]), "COO column index -3 is out of range"),
    ("coo-lengths", coo([0, 1], [0]), "same length; got 2, 1 and 2"),
    ("coo-float-row", coo([0.0], [0]), "COO 'row' must be a 1-D integer array"),
    (
        "coo-huge-rows",
        coo(np.zeros(0, int), np.zeros(0, int), np.zeros(0), shape=(10**12, M)),
        f"at most {MAX_CHUNK_ROWS} rows; got {10**12}",
    ),
    ("coo-wrong-width", coo([0], [0], shape=(2, M + 1)), f"expected {M} features per row; got 5"),
    ("coo-negative-shape", coo([0], [0], shape=(-2, M)), "'shape' must be [rows, columns]"),
    (
        "bsr-format",
        sparse_npz("bsr", (1, M), data=np.ones((1, 1, M)), indices=[0], indptr=[0, 1]),
        "CSR, CSC or COO matrix in the .npz; got bsr",
    ),
    (
        "dia-format",
        sparse_npz("dia", (1, M), data=np.ones((1, M)), offsets=[0]),
        "got dia",
    ),
    (
        "csr-extra-array",
        sparse_npz("csr", (1, M), data=[1.0], indices=[0], indptr=[0, 1], extra=[1]),
        "unexpected ['extra']",
    ),
    ("no-format", zip_of({"data.npy": raw_npy(np.ones(2))}), "'format' array"),
]


@pytest.mark.parametrize(
    ("body", "fragment"), [c[1:] for c in SPARSE_CASES], ids=[c[0] for c in SPARSE_CASES]
)
async def test_hostile_sparse_npz_is_refused_before_scipy_sees_it(selector, body, fragment):
    assert_problem(await post_chunk(selector, npz(body)), 422, fragment)
    await assert_untouched(selector)


async def test_out_of_range_is_an_inconsistency_and_a_wrong_width_a_mismatch(selector):
    out_of_range = await post_chunk(selector, npz(csc([0, 3])))
    assert out_of_range.json()["type"] == "urn:sift:problem:inconsistent"
    wide = await post_chunk(selector, npz(coo([0], [0], shape=(2, M + 1))))
    assert wide.json()["type"] == "urn:sift:problem:selector-mismatch"
    await assert_untouched(selector)


JSON_CSR_CASES = [
    ({"shape": [10**12, M], "indptr": [0], "indices": [], "data": []}, "at most"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [0.5], "data": [1]}, "element 0 is 0.5"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [True], "data": [1]}, "integers"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [2**64 - 1], "data": [1]}, "beyond 64 bits"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [10**30], "data": [1]}, "integers"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [0], "data": [[1]]}, "element 0 is [1]"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [0], "data": ["1"]}, "numbers"),
    ({"shape": [1, M], "indptr": [0, 1], "indices": [-1], "data": [1]}, "-1 is out of range"),
    ({"shape": [1, True], "indptr": [0, 1], "indices": [0], "data": [1]}, "'shape'"),
    ({"shape": [1, M + 1], "indptr": [0, 1], "indices": [0], "data": [1]}, f"got {M + 1}"),
]


@pytest.mark.parametrize(("document", "fragment"), JSON_CSR_CASES)
async def test_hostile_json_csr_is_refused(selector, document, fragment):
    assert_problem(await post_chunk(selector, {"json": document}), 422, fragment)
    await assert_untouched(selector)


async def test_duplicates_are_summed_and_canonical_sparse_is_accepted(client):
    """Duplicate entries add up (as scipy would); unsorted CSR and CSC/COO give the same rows."""
    dense = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 4.0]])
    bodies = {
        "csr": npz_bytes(sp.csr_matrix(dense)),
        "csc": npz_bytes(sp.csc_matrix(dense)),
        "coo": coo([0, 0, 1, 1, 0], [0, 2, 1, 3, 0], np.array([0.5, 2.0, 3.0, 4.0, 0.5])),
        "unsorted": csr([2, 0, 3, 1], [0, 2, 4], np.array([2.0, 1.0, 4.0, 3.0]), shape=(2, M)),
    }
    weights = {}
    for name, body in bodies.items():
        await create_selector(client, name, M, params={"k": 2})
        response = await post_chunk(client, npz(body), name)
        assert response.status_code == 200, response.text
        weights[name] = (await client.get(f"/v1/selectors/{name}/weights")).json()["weights"]
    assert weights["csc"] == weights["csr"] == weights["coo"] == weights["unsorted"]


async def test_duplicates_are_summed_before_the_magnitude_check(selector):
    doubled = coo([1, 1], [2, 2], np.array([MAX_ABS_VALUE, MAX_ABS_VALUE]))
    assert_problem(await post_chunk(selector, npz(doubled)), 422, LIMIT, "row 1, column 2")
    await assert_untouched(selector)


# -- .npy headers and dtypes ----------------------------------------------------------------------

NPY_CASES = [
    # (id, body, status, fragment)
    (
        "claims-1e12-values",
        npy_header("<f8", (10**6, 10**6), b"\0" * 64),
        400,
        "promises shape (1000000, 1000000) of 8-byte values (8000000000000 bytes)",
    ),
    ("truncated", npy_bytes(np.ones((4, M)))[:-8], 400, "holds 120 bytes after the header"),
    ("trailing-bytes", npy_bytes(np.ones((4, M))) + b"\0" * 8, 400, "holds 136 bytes"),
    ("object-pickle", raw_npy(np.array([[1, "a", None, 2]], dtype=object)), 422, "pickle"),
    ("void", npy_header("|V8", (1, M), b"\0" * 8 * M), 422, "dtype |V8"),
    (
        "structured",
        raw_npy(np.zeros((1, M), dtype=[("a", "<f4"), ("b", "<i4")])),
        422,
        "structured dtype",
    ),
    ("complex", npy_bytes(np.ones((1, M), dtype=complex)), 422, "dtype complex128"),
    (
        "float128-1e400",
        npy_bytes(np.full((1, M), np.longdouble("1e400"))),
        422,
        "dtype float128",
    ),
    ("datetime", npy_bytes(np.zeros((1, M), dtype="datetime64[s]")), 422, "datetime64"),
    ("timedelta", npy_bytes(np.zeros((1, M), dtype="timedelta64[s]")), 422, "timedelta64"),
    ("strings", npy_bytes(np.array([["a"] * M])), 422, "dtype <U1"),
    ("bytes", npy_bytes(np.array([[b"a"] * M])), 422, "dtype |S1"),
    ("3-d", npy_bytes(np.ones((1, 2, 2))), 422, "(3-D)"),
    ("bad-magic", b"\x93NUMPX\x01\x00" + b"\0" * 64, 400, "magic"),
    ("version-4", npy_header("<f8", (1, M), b"\0" * 32, version=(4, 0)), 400, "version"),
    ("header-too-long", npy_header("<f8", (1, M), b"\0" * 32, pad=" " * 20_000), 400, "header"),
    ("header-extra-key", npy_header("<f8", (1, M), b"\0" * 32, pad=1), 400, "exactly the keys"),
    ("header-not-literal", b"\x93NUMPY\x01\x00\x0c\x00__import__()", 400, "unreadable header"),
    ("header-cut", b"\x93NUMPY\x01\x00\xff\x00{'descr'", 400, "header needs 255 bytes"),
    ("fortran-order-string", npy_header("<f8", (1, M), b"\0" * 32, "yes"), 400, "fortran"),
    ("negative-shape", npy_header("<f8", (-1, M), b""), 400, "'shape'"),
    ("shape-list", npy_header("<f8", [1, M], b"\0" * 32), 400, "'shape'"),
    ("descr-unknown", npy_header("<q7", (1, M), b""), 422, "dtype"),
    ("zero-width-strings", npy_header("<U0", (10**9, 10**9), b""), 422, "dtype"),
]


@pytest.mark.parametrize(
    ("body", "status", "fragment"), [c[1:] for c in NPY_CASES], ids=[c[0] for c in NPY_CASES]
)
async def test_hostile_npy_is_refused(selector, body, status, fragment):
    assert_problem(await post_chunk(selector, npy(body)), status, fragment)
    await assert_untouched(selector)


ROWS = np.array([[1.0, -2.0, 0.5, 3.0], [0.0, 4.0, 7.25, -1.0], [2.0, 2.0, -3.0, 0.5]])
TWINS = {
    "big-endian": raw_npy(ROWS.astype(">f8")),
    "fortran-order": raw_npy(np.asfortranarray(ROWS)),
    "big-endian-fortran": raw_npy(np.asfortranarray(ROWS.astype(">f8"))),
    "version-2": npy_header("<f8", ROWS.shape, ROWS.tobytes(), version=(2, 0)),
    "version-3": npy_header("<f8", ROWS.shape, ROWS.tobytes(), version=(3, 0)),
    "big-endian-int": raw_npy(ROWS.astype(np.int64).astype(">i4")),
}


@pytest.mark.parametrize("variant", sorted(TWINS))
async def test_legitimate_npy_variants_equal_their_plain_twin(client, variant):
    """Big-endian, Fortran order and later format versions are data, not attacks: accepted and
    equal to the plain little-endian C-order array (compared through two selectors' weights)."""
    twin = TWINS[variant]
    plain = ROWS.astype(np.int64).astype(np.float64) if variant.endswith("-int") else ROWS
    for name, body in (("plain", npy_bytes(plain)), ("variant", twin)):
        await create_selector(client, name, M, params={"k": 2, "normalize_rows": False})
        response = await post_chunk(client, npy(body), name)
        assert response.status_code == 200, response.text
    plain_weights = (await client.get("/v1/selectors/plain/weights")).json()["weights"]
    variant_weights = (await client.get("/v1/selectors/variant/weights")).json()["weights"]
    assert variant_weights == plain_weights
    assert any(plain_weights)


@pytest.mark.parametrize("dtype", ["|b1", "|i1", "<u2", ">i8", "<f2", ">f4"])
async def test_every_accepted_numeric_dtype_is_taken(selector, dtype):
    rows = np.array([[1, 0, 1, 1], [0, 1, 1, 0]]).astype(np.dtype(dtype))
    response = await post_chunk(selector, npy(raw_npy(rows)))
    assert response.status_code == 200, response.text


# -- .npz archives ------------------------------------------------------------------------------

NPZ_CASES = [
    # (id, body, status, fragment)
    ("lying-size", lying_zip(crc_too=False), 400, "valid .npz"),
    ("lying-size-and-crc", lying_zip(crc_too=True), 400, "promises"),
    (
        "too-many-members",
        zip_of({f"m{i}.npy": raw_npy(np.zeros(1)) for i in range(MAX_MEMBERS + 1)}),
        422,
        f"at most {MAX_MEMBERS} arrays; got {MAX_MEMBERS + 1}",
    ),
    ("member-not-npy", zip_of({"data.txt": b"1,2,3"}), 422, "<key>.npy; got 'data.txt'"),
    ("member-in-folder", zip_of({"a/data.npy": raw_npy(np.ones(1))}), 422, "'a/data.npy'"),
    ("member-garbage", zip_of({"data.npy": b"\x93NUMPY garbage"}), 400, "array 'data'"),
    ("member-object", zip_of({"data.npy": raw_npy(np.array([None]))}), 422, "pickle"),
    ("not-a-zip", b"PK\x03\x04 not a zip", 400, "valid .npz"),
    ("stored-crc", damaged_stored_zip("data"), 400, "fails its CRC"),
    ("stored-misplaced", damaged_stored_zip("offset"), 400, "does not lie where its headers"),
]


@pytest.mark.parametrize(
    ("body", "status", "fragment"), [c[1:] for c in NPZ_CASES], ids=[c[0] for c in NPZ_CASES]
)
async def test_hostile_npz_is_refused(selector, body, status, fragment):
    assert_problem(await post_chunk(selector, npz(body)), status, fragment)
    await assert_untouched(selector)


async def test_npz_may_inflate_to_the_body_limit_and_no_further(app_factory):
    async with app_factory(max_body_bytes=20_000) as (_, http):
        await create_selector(http, "s", M, params={"k": 2})
        over = zip_of({"data.npy": npy_header("<f8", (2501,), b"\0" * 20_008)})
        assert_problem(
            await post_chunk(http, npz(over)), 413, "more than the body limit of 20000 bytes"
        )
        await assert_untouched(http)
        # A real save_npz inflating to several times its size, within the limit: accepted.
        rows = sp.random(200, M, density=0.5, rng=np.random.default_rng(1))
        body = npz_bytes(sp.csr_matrix(rows))
        inflated = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(body)).infolist())
        assert len(body) < inflated <= 20_000
        assert (await post_chunk(http, npz(body))).status_code == 200


# -- row counts ---------------------------------------------------------------------------------


async def test_a_chunk_holds_at_most_max_chunk_rows_in_every_container(app_factory):
    # A million JSON rows take 10 MB: over the default JSON limit, so raise it here.
    async with app_factory(max_json_body_bytes=16 * 2**20) as (_, selector):
        await create_selector(selector, "s", M, params={"k": 2})
        await refuse_too_many_rows(selector)


async def refuse_too_many_rows(selector) -> None:
    too_many = f"at most {MAX_CHUNK_ROWS} rows; got {MAX_CHUNK_ROWS + 1}"
    dense = np.zeros((MAX_CHUNK_ROWS + 1, M), dtype=np.uint8)
    assert_problem(await post_chunk(selector, npy(npy_bytes(dense))), 422, too_many)
    json_rows = b"[" + b",".join([b"[0,0,0,0]"] * (MAX_CHUNK_ROWS + 1)) + b"]"
    body = {"content": json_rows, "headers": {"content-type": "application/json"}}
    assert_problem(await post_chunk(selector, body), 422, too_many)
    shape = [MAX_CHUNK_ROWS + 1, M]
    csr_document = {"shape": shape, "indptr": [0], "indices": [], "data": []}
    assert_problem(await post_chunk(selector, {"json": csr_document}), 422, too_many)
    empty = coo(np.zeros(0, int), np.zeros(0, int), np.zeros(0), shape=(MAX_CHUNK_ROWS + 1, M))
    assert_problem(await post_chunk(selector, npz(empty)), 422, too_many)
    await assert_untouched(selector)


# -- every container, every route: nested JSON and magnitudes ------------------------------------

N_SAMPLES = 3
VIEWS = {"a": 2, "b": 2}


@pytest.fixture
async def every_selector(client):
    """A selector for every route that takes rows or columns (IOC's with data, for transform)."""
    await create_selector(client, "rows", M, params={"k": 2, "normalize_rows": False})
    for name, method in (("lab", "ocfs"), ("proj", "ioc")):
        body = {"name": name, "method": method, "n_features": M}
        assert (await client.post("/v1/selectors", json=body)).status_code == 201
    seed = {"rows": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]], "labels": [0, 1, 2]}
    assert (await post_chunk(client, {"json": seed}, "proj")).status_code == 200
    views = {"name": "mv", "method": "omvfs", "views": VIEWS, "params": {"n_clusters": 2}}
    assert (await client.post("/v1/selectors", json=views)).status_code == 201
    for name, method in (("cols", "ofs"), ("qr", "iqrp")):
        body = {"name": name, "method": method, "n_samples": N_SAMPLES}
        assert (await client.post("/v1/selectors", json=body)).status_code == 201
    return client


def with_value(value: float) -> np.ndarray:
    """Rows for an M-wide selector with ``value`` at row 1, column 2."""
    return np.array([[1.0, -2.0, 0.5, 3.0], [0.0, 4.0, value, -1.0]])


def view_with_value(value: float) -> np.ndarray:
    """A nonnegative 2 x 2 view with ``value`` at row 1, column 1."""
    return np.array([[1.0, 2.0], [3.0, value]])


def columns_with_value(value: float) -> np.ndarray:
    """Two feature columns (N_SAMPLES x 2) with ``value`` in column 0 at sample 1."""
    return np.array([[1.0, 2.0], [value, 0.5], [3.0, 1.0]])


def npz_views(a: Any, b: Any) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=a, b=b)
    return buffer.getvalue()


ROWS_AT = "at row 1, column 2"
CONTAINERS: dict[str, Any] = {
    # id: (selector, route, body of a value, where the value is reported)
    "json-list": ("rows", "chunks", lambda v: {"json": with_value(v).tolist()}, ROWS_AT),
    "json-rows": ("rows", "chunks", lambda v: {"json": {"rows": with_value(v).tolist()}}, ROWS_AT),
    "json-csr": ("rows", "chunks", lambda v: {"json": csr_json(with_value(v))}, ROWS_AT),
    "npy-f8": ("rows", "chunks", lambda v: npy(npy_bytes(with_value(v))), ROWS_AT),
    "npy-f8-big-endian": (
        "rows",
        "chunks",
        lambda v: npy(raw_npy(with_value(v).astype(">f8"))),
        ROWS_AT,
    ),
    "npz-csr": ("rows", "chunks", lambda v: npz(npz_bytes(sp.csr_matrix(with_value(v)))), ROWS_AT),
    "npz-csc": ("rows", "chunks", lambda v: npz(npz_bytes(sp.csc_matrix(with_value(v)))), ROWS_AT),
    "npz-coo": ("rows", "chunks", lambda v: npz(npz_bytes(sp.coo_matrix(with_value(v)))), ROWS_AT),
    "labelled-json": (
        "lab",
        "chunks",
        lambda v: {"json": {"rows": with_value(v).tolist(), "labels": [0, "b"]}},
        ROWS_AT,
    ),
    "labelled-json-csr": (
        "lab",
        "chunks",
        lambda v: {"json": {**csr_json(with_value(v)), "labels": [0, 1]}},
        ROWS_AT,
    ),
    "labelled-npz-rows": (
        "lab",
        "chunks",
        lambda v: npz(npz_labelled(with_value(v), ["a", "b"])),
        ROWS_AT,
    ),
    "labelled-npz-csr": (
        "lab",
        "chunks",
        lambda v: npz(npz_labelled(sp.csr_matrix(with_value(v)), [0, 1])),
        ROWS_AT,
    ),
    "multi-view-json": (
        "mv",
        "chunks",
        lambda v: {"json": {"views": {"a": [[1, 1], [2, 2]], "b": view_with_value(v).tolist()}}},
        "view 'b': ",
    ),
    "multi-view-json-csr": (
        "mv",
        "chunks",
        lambda v: {"json": {"views": {"a": [[1, 1], [2, 2]], "b": csr_json(view_with_value(v))}}},
        "at row 1, column 1",
    ),
    "multi-view-npz": (
        "mv",
        "chunks",
        lambda v: npz(npz_views(np.ones((2, 2)), view_with_value(v))),
        "view 'b': ",
    ),
    "ofs-columns-json": (
        "cols",
        "features",
        lambda v: {"json": {"columns": columns_with_value(v).T.tolist()}},
        "in column 0 at sample 1",
    ),
    "iqrp-columns-npy": (
        "qr",
        "features",
        lambda v: npy(npy_bytes(columns_with_value(v))),
        "in column 0 at sample 1",
    ),
    "transform-json": ("proj", "transform", lambda v: {"json": with_value(v).tolist()}, ROWS_AT),
    "transform-npz-csc": (
        "proj",
        "transform",
        lambda v: npz(npz_bytes(sp.csc_matrix(with_value(v)))),
        ROWS_AT,
    ),
}


async def snapshot(client, name: str) -> tuple[int, int, int]:
    described = (await client.get(f"/v1/selectors/{name}")).json()
    seen = described.get("rows_seen", described.get("features_seen"))
    return described["version"], seen, described["state"]["pending_entries"]


@pytest.mark.parametrize("container", sorted(CONTAINERS))
async def test_values_beyond_the_limit_are_refused_everywhere(every_selector, container):
    name, route, body, where = CONTAINERS[container]
    before = await snapshot(every_selector, name)
    values = [1e308, -1e308, 1e51, -1.0000001e50]
    if "json" not in container:  # JSON has no NaN or infinity (orjson refuses them: 400)
        values += [np.nan, np.inf]
    for value in values:
        if name == "mv":
            value = abs(value)  # a negative view value is refused first, for NMF
        response = await every_selector.post(f"/v1/selectors/{name}/{route}", **body(value))
        fragments = [LIMIT, f"got {value}"] if np.isfinite(value) else ["finite; got"]
        assert_problem(response, 422, *fragments, where)
    assert await snapshot(every_selector, name) == before


@pytest.mark.parametrize("container", sorted(CONTAINERS))
async def test_values_at_the_limit_are_accepted_everywhere(every_selector, container):
    name, route, body, _ = CONTAINERS[container]
    value = MAX_ABS_VALUE if name == "mv" else -MAX_ABS_VALUE
    response = await every_selector.post(f"/v1/selectors/{name}/{route}", **body(value))
    assert response.status_code == 200, response.text
    if route == "transform":
        assert np.isfinite(np.array(response.json()["rows"])).all()
    else:
        described = (await every_selector.get(f"/v1/selectors/{name}")).json()
        assert described["state"]["pending_entries"] == 0
        weights = (await every_selector.get(f"/v1/selectors/{name}/weights")).json()["weights"]
        assert np.isfinite(np.array(weights, dtype=float)).all()


async def test_float128_beyond_float64_is_refused_not_converted(selector):
    rows = np.ones((1, M), dtype=np.longdouble)
    rows[0, 1] = np.longdouble("1e400")  # finite in float128, infinite in float64
    assert_problem(await post_chunk(selector, npy(npy_bytes(rows))), 422, "float128")
    await assert_untouched(selector)


async def test_float32_rows_are_checked_and_stay_float32(selector):
    """float32 cannot hold 1e51 (it overflows to inf when written): infinities are refused; the
    largest float32 is within the limit, and float32 rows stay float32 (half the log)."""
    rows = np.ones((2, M), dtype=np.float32)
    rows[1, 3] = np.inf
    assert_problem(await post_chunk(selector, npy(npy_bytes(rows))), 422, "finite; got inf")
    await assert_untouched(selector)
    rows[1, 3] = np.finfo(np.float32).max
    assert decode_rows(npy_bytes(rows), "application/x-npy", M, 10**6).rows.dtype == np.float32
    assert (await post_chunk(selector, npy(npy_bytes(rows)))).status_code == 200


async def test_huge_json_integers_are_values_beyond_the_limit(selector):
    response = await post_chunk(selector, {"json": [[1, 2, 10**60, 4]]})
    assert_problem(response, 422, LIMIT, "at row 0, column 2")
    await assert_untouched(selector)


NESTED = [
    # (id, selector, route, JSON body, fragment)
    (
        "chunk-list",
        "rows",
        "chunks",
        [[1, 2, 3, [4]]],
        "body must hold numbers only; row 0, column 3 is [4]",
    ),
    ("chunk-rows", "rows", "chunks", {"rows": [[1, 2, {"a": 1}, 4]]}, 'column 2 is {"a":1}'),
    ("chunk-bool", "rows", "chunks", [[1, 2, True, 4]], "row 0, column 2 is true"),
    ("chunk-string", "rows", "chunks", [[1, "2", 3, 4]], 'column 1 is "2"'),
    ("chunk-null", "rows", "chunks", [[1, 2, 3, None]], "column 3 is null"),
    ("chunk-row-not-list", "rows", "chunks", [[1, 2, 3, 4], 5], "body[1] must be a list"),
    (
        "labelled",
        "lab",
        "chunks",
        {"rows": [[1, 2, 3, 4], [1, [2], 3, 4]], "labels": [1, 2]},
        "row 1, column 1 is [2]",
    ),
    (
        "labelled-csr",
        "lab",
        "chunks",
        {"shape": [1, M], "indptr": [0, 1], "indices": [0], "data": [[1]], "labels": [1]},
        "element 0 is [1]",
    ),
    (
        "multi-view",
        "mv",
        "chunks",
        {"views": {"a": [[1, [1]]], "b": [[1, 1]]}},
        "view 'a': body must hold numbers only; row 0, column 1 is [1]",
    ),
    (
        "multi-view-rows",
        "mv",
        "chunks",
        {"views": {"a": {"rows": [[1, 1]]}, "b": {"rows": [[[1], 1]]}}},
        "view 'b': rows must hold numbers only",
    ),
    ("ofs-columns", "cols", "features", {"columns": [[1, [2], 3]]}, "column 0, sample 1 is [2]"),
    ("iqrp-columns", "qr", "features", {"columns": [[1, 2, 3], [1, 2, "x"]]}, "column 1, sample 2"),
    ("transform", "proj", "transform", [[0, 0, 0, [1]]], "row 0, column 3 is [1]"),
]


@pytest.mark.parametrize(
    ("name", "route", "document", "fragment"),
    [c[1:] for c in NESTED],
    ids=[c[0] for c in NESTED],
)
async def test_json_elements_that_are_not_numbers_are_named(
    every_selector, name, route, document, fragment
):
    before = await snapshot(every_selector, name)
    response = await every_selector.post(f"/v1/selectors/{name}/{route}", json=document)
    assert_problem(response, 422, fragment)
    assert await snapshot(every_selector, name) == before


TRANSFORM_CASES = [
    ("csc-far-out", csc([0, 1_000_000]), "CSC row index 1000000 is out of range"),
    ("csc-one-past", csc([0, 3]), "CSC row index 3 is out of range"),
    ("csc-indptr-decreasing", csc([0, 1], [0, 2, 1, 2, 2]), "non-decreasing"),
    ("coo-huge-rows", coo([0], [0], shape=(10**12, M)), "at most"),
]


@pytest.mark.parametrize(
    ("body", "fragment"), [c[1:] for c in TRANSFORM_CASES], ids=[c[0] for c in TRANSFORM_CASES]
)
async def test_transform_refuses_hostile_sparse_rows(every_selector, body, fragment):
    before = await snapshot(every_selector, "proj")
    response = await every_selector.post("/v1/selectors/proj/transform", **npz(body))
    assert_problem(response, 422, fragment)
    assert await snapshot(every_selector, "proj") == before
    # And the route still works.
    good = await every_selector.post("/v1/selectors/proj/transform", json=[[1, 0, 0, 0]])
    assert good.status_code == 200, good.text


LABELLED_NPZ = [
    ("object-labels", npz_labelled(np.ones((1, M)), np.array([{"a": 1}], dtype=object)), "pickle"),
    ("bytes-labels-not-utf8", npz_labelled(np.ones((1, M)), np.array([b"\xff"])), "UTF-8"),
    ("string-rows", npz_labelled(np.array([["1"] * M]), [0]), "numeric"),
    (
        "rows-and-extra",
        zip_of(
            {
                "rows.npy": npy_bytes(np.ones((1, M))),
                "labels.npy": npy_bytes(np.array([0])),
                "weights.npy": npy_bytes(np.ones(1)),
            }
        ),
        "'weights'",
    ),
    (
        "csr-parts-out-of-range",
        zip_of(
            {
                "data.npy": npy_bytes(np.ones(1)),
                "indices.npy": npy_bytes(np.array([M])),
                "indptr.npy": npy_bytes(np.array([0, 1])),
                "shape.npy": npy_bytes(np.array([1, M])),
                "labels.npy": npy_bytes(np.array([0])),
            }
        ),
        f"CSR column index {M} is out of range",
    ),
    (
        "csr-parts-huge-rows",
        zip_of(
            {
                "data.npy": npy_bytes(np.ones(0)),
                "indices.npy": npy_bytes(np.zeros(0, int)),
                "indptr.npy": npy_bytes(np.array([0])),
                "shape.npy": npy_bytes(np.array([10**12, M])),
                "labels.npy": npy_bytes(np.array([0])),
            }
        ),
        "at most",
    ),
]


@pytest.mark.parametrize(
    ("body", "fragment"), [c[1:] for c in LABELLED_NPZ], ids=[c[0] for c in LABELLED_NPZ]
)
async def test_hostile_labelled_npz_is_refused(every_selector, body, fragment):
    response = await post_chunk(every_selector, npz(body), "lab")
    assert_problem(response, 422, fragment)
    await assert_untouched(every_selector, "lab")


async def test_byte_string_labels_are_strings(every_selector):
    body = npz_labelled(np.ones((2, M)), np.array([b"spam", b"eggs"]))
    response = await post_chunk(every_selector, npz(body), "lab")
    assert response.status_code == 200, response.text
    described = (await every_selector.get("/v1/selectors/lab")).json()
    assert [c["label"] for c in described["classes"]] == ["spam", "eggs"]
