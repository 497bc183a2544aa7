"""Every bad input gets a precise 4xx problem+json and leaves the selector untouched."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from tests.support.api import (
    assert_problem,
    assert_untouched,
    create_selector,
    npy_bytes,
    npz_bytes,
)

pytestmark = pytest.mark.asyncio

M = 6
NPY = {"content-type": "application/x-npy"}
NPZ = {"content-type": "application/x-npz"}


@pytest.fixture
async def selector(client):
    await create_selector(client, "s", M, params={"k": 2})
    return client


async def test_unknown_selector_everywhere(client):
    for method, path in [
        ("GET", "/v1/selectors/nope"),
        ("DELETE", "/v1/selectors/nope"),
        ("GET", "/v1/selectors/nope/top"),
        ("GET", "/v1/selectors/nope/weights"),
    ]:
        assert_problem(await client.request(method, path), 404, "'nope'")
    response = await client.post("/v1/selectors/nope/chunks", json=[[1.0]])
    assert_problem(response, 404, "'nope'")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"name": "bad name", "method": "fsds", "n_features": 3}, "selector name"),
        ({"name": "a{b}", "method": "fsds", "n_features": 3}, "selector name"),
        ({"name": "x", "method": "lasso", "n_features": 3}, "unknown method 'lasso'"),
        ({"name": "x", "method": "fsds", "n_features": 0}, "n_features"),
        ({"name": "x", "method": "fsds", "n_features": "3"}, "n_features"),
        ({"name": "x", "method": "fsds", "n_features": 9, "params": {"k": 5, "ell": 5}}, "ell"),
        ({"name": "x", "method": "fsds", "n_features": 9, "params": {"ell": 1}}, "ell"),
        (
            {"name": "x", "method": "fsds", "n_features": 9, "params": {"alpha_exponent": -1}},
            "alpha",
        ),
        ({"name": "x", "method": "fsds", "n_features": 9, "params": {"kk": 1}}, "kk"),
        ({"name": "x", "method": "fsds", "n_features": 2, "feature_names": ["a"]}, "feature_names"),
        ({"name": "x", "method": "fsds", "n_features": 2, "feature_names": ["a", "a"]}, "'a'"),
        ({"name": "x", "method": "fsds", "n_features": 2, "colour": 1}, "colour"),
    ],
)
async def test_invalid_create(client, body, fragment):
    assert_problem(await client.post("/v1/selectors", json=body), 422, fragment)
    assert (await client.get("/v1/selectors")).json()["selectors"] == []


async def test_duplicate_name_conflicts(selector):
    response = await selector.post(
        "/v1/selectors", json={"name": "s", "method": "fsds", "n_features": 2}
    )
    assert_problem(response, 409, "'s' already exists")
    assert (await selector.get("/v1/selectors/s")).json()["n_features"] == M


def object_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([[1, "a"]], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def broken_csr_npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(
        buffer,
        format=np.array(b"csr"),
        shape=np.array([2, M]),
        data=np.array([1.0, 2.0]),
        indices=np.array([0, 1]),
        indptr=np.array([0, 2, 1]),
    )
    return buffer.getvalue()


BAD_CHUNKS = [
    # (kwargs, status, fragment)
    ({"json": [[1.0] * (M - 1)]}, 422, f"expected {M} features per row; got {M - 1}"),
    ({"content": npy_bytes(np.ones((2, M + 1))), "headers": NPY}, 422, f"got {M + 1}"),
    ({"content": npy_bytes(np.ones(M)), "headers": NPY}, 422, "got 1-D"),
    ({"json": []}, 422, "empty chunk"),
    ({"json": {"rows": []}}, 422, "empty chunk"),
    ({"content": npy_bytes(np.ones((0, M))), "headers": NPY}, 422, "empty chunk"),
    ({"json": [[1.0] * M, [1.0] * (M - 2)]}, 422, "ragged"),
    ({"json": [[1.0] * (M - 1) + ["x"]]}, 422, "numbers"),
    ({"json": [[1.0] * (M - 1) + [None]]}, 422, "numbers"),
    ({"json": {"columns": []}}, 422, "keys ['columns']"),
    (
        {"content": npy_bytes(np.array([[1.0] * (M - 1) + [np.nan]])), "headers": NPY},
        422,
        "finite; got nan at row 0, column 5",
    ),
    (
        {"content": npz_bytes(sp.csr_matrix(np.array([[0, 0, np.inf, 0, 0, 0]]))), "headers": NPZ},
        422,
        "finite; got inf at row 0, column 2",
    ),
    (
        {"json": {"shape": [2, M], "indptr": [0, 2, 1], "indices": [0, 1], "data": [1, 2]}},
        422,
        "non-decreasing",
    ),
    (
        {"json": {"shape": [1, M], "indptr": [0, 1], "indices": [M], "data": [1]}},
        422,
        f"column index {M} is out of range",
    ),
    (
        {"json": {"shape": [1, M], "indptr": [0, 2], "indices": [0, 1], "data": [1]}},
        422,
        "same length",
    ),
    (
        {"json": {"shape": [2, M], "indptr": [0, 1], "indices": [0], "data": [1]}},
        422,
        "rows + 1 = 3",
    ),
    ({"json": {"shape": [1, M], "indptr": [0, 1], "indices": [0]}}, 422, "missing data"),
    ({"content": broken_csr_npz(), "headers": NPZ}, 422, "non-decreasing"),
    ({"content": object_npy(), "headers": NPY}, 422, "pickle"),
    ({"content": npy_bytes(np.array([["a"] * M])), "headers": NPY}, 422, "dtype <U1"),
    ({"content": npy_bytes(np.ones((1, M), dtype=complex)), "headers": NPY}, 422, "complex"),
    ({"content": b"\x93NUMPY garbage", "headers": NPY}, 400, ".npy"),
    ({"content": b"not a zip", "headers": NPZ}, 400, ".npz"),
    ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "JSON"),
    ({"content": b"1,2,3", "headers": {"content-type": "text/plain"}}, 415, "'text/plain'"),
    # A CSV's first line is its header: these are three column names, and no rows.
    ({"content": b"1,2,3", "headers": {"content-type": "text/csv"}}, 422, "no rows"),
    ({"content": b"[[1]]", "headers": {"content-type": ""}}, 415, "no Content-Type"),
]


@pytest.mark.parametrize(("kwargs", "status", "fragment"), BAD_CHUNKS)
async def test_bad_chunk_is_rejected_and_changes_nothing(selector, kwargs, status, fragment):
    response = await selector.post("/v1/selectors/s/chunks", **kwargs)
    assert_problem(response, status, fragment)
    await assert_untouched(selector)


async def test_body_over_the_limit_is_413_without_reading_it_all(app_factory):
    async with app_factory(max_body_bytes=1000) as (_, http):
        await create_selector(http, "s", M)
        big = npy_bytes(np.ones((100, M)))
        assert_problem(
            await http.post("/v1/selectors/s/chunks", content=big, headers=NPY), 413, "1000 bytes"
        )
        read: list[int] = []

        async def endless():
            # No Content-Length: the limit must stop the read long before the end.
            for _ in range(10_000):
                read.append(1)
                yield b"x" * 100

        response = await http.post("/v1/selectors/s/chunks", content=endless(), headers=NPY)
        assert_problem(response, 413, "exceeds the limit")
        assert len(read) < 100
        await assert_untouched(http)


async def test_zip_bomb_npz_is_refused(app_factory):
    """An .npz may inflate to at most the body limit: a member one byte over it is a 413,
    whatever the archive's own size, before anything is inflated."""
    async with app_factory(max_body_bytes=10_000) as (_, http):
        await create_selector(http, "s", M)
        for size in (5_000_000, 10_001):
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr("data.npy", b"\0" * size)
            response = await http.post(
                "/v1/selectors/s/chunks", content=buffer.getvalue(), headers=NPZ
            )
            assert_problem(response, 413, f"inflates to {size} bytes", "body limit of 10000")
        await assert_untouched(http)
