"""Columns are matched by name wherever a chunk names them (service.wire.names).

``variance`` keeps exact per-feature moments, so a chunk that landed on the wrong feature shows
in its state at once; every check compares against the same rows pushed in the selector's order.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from tests.api.test_tables import arrow_rows, csv_body

pytestmark = pytest.mark.asyncio

NAMES = ["a", "b", "c", "d", "e"]
ROWS = np.arange(15.0).reshape(3, 5) ** 1.5


async def create(http, name: str, names: list[str] | None = NAMES, method: str = "variance"):
    body: dict[str, Any] = {"name": name, "method": method, "n_features": len(NAMES)}
    if names is not None:
        body["feature_names"] = names
    response = await http.post("/v1/selectors", json=body)
    assert response.status_code == 201, response.text


async def weights(http, name: str) -> np.ndarray:
    response = await http.get(f"/v1/selectors/{name}/weights")
    assert response.status_code == 200, response.text
    return np.array(response.json()["weights"])


async def scores_by_name(http, name: str) -> dict[str, float]:
    top = (await http.get(f"/v1/selectors/{name}/top", params={"h": len(NAMES)})).json()
    return {feature["name"]: feature["score"] for feature in top["features"]}


async def described(http, name: str) -> dict[str, Any]:
    return dict((await http.get(f"/v1/selectors/{name}")).json())


def npz(**arrays: Any) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def permuted(names: list[str]) -> tuple[list[str], np.ndarray]:
    """The columns of ROWS under ``names`` (a permutation of NAMES)."""
    return names, ROWS[:, [NAMES.index(n) for n in names]]


async def reference(http) -> np.ndarray:
    await create(http, "reference")
    assert (
        await http.post("/v1/selectors/reference/chunks", json=ROWS.tolist())
    ).status_code == 200
    return await weights(http, "reference")


async def test_a_named_chunk_in_another_order_lands_on_the_right_features(client):
    expected = await reference(client)
    names, rows = permuted(["e", "d", "c", "b", "a"])
    # The same named chunk as each media type carries it: a JSON body, or the bytes of a file.
    chunks: list[tuple[dict[str, Any] | bytes, str]] = [
        ({"rows": rows.tolist(), "feature_names": names}, "application/json"),
        (npz(rows=rows, feature_names=np.array(names)), "application/x-npz"),
        (
            {
                **_csr(sp.csr_matrix(rows)),
                "feature_names": names,
            },
            "application/json",
        ),
        (_save_npz_with_names(sp.csr_matrix(rows), names), "application/x-npz"),
    ]
    for index, (content, media_type) in enumerate(chunks):
        name = f"named-{index}"
        await create(client, name)
        kwargs: dict[str, Any] = (
            {"json": content} if isinstance(content, dict) else {"content": content}
        )
        response = await client.post(
            f"/v1/selectors/{name}/chunks", headers={"content-type": media_type}, **kwargs
        )
        assert response.status_code == 200, (index, response.text)
        np.testing.assert_allclose(await weights(client, name), expected, rtol=1e-12)


async def test_names_that_are_not_the_selectors_are_refused_whole(client):
    await create(client, "strict")
    for names in (["a", "b", "zz", "d", "e"], ["a", "b", "c", "d"], [*NAMES, "f"]):
        rows = np.ones((2, len(names)))
        response = await client.post(
            "/v1/selectors/strict/chunks", json={"rows": rows.tolist(), "feature_names": names}
        )
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["type"].endswith("selector-mismatch"), problem
        assert "missing" in problem["detail"] and "unexpected" in problem["detail"]
    missing_zz = await client.post(
        "/v1/selectors/strict/chunks",
        json={"rows": [[1.0] * 5], "feature_names": ["a", "b", "zz", "d", "e"]},
    )
    assert "missing ['c'], unexpected ['zz']" in missing_zz.json()["detail"]
    assert (await described(client, "strict"))["rows_seen"] == 0


async def test_a_selector_without_names_takes_the_first_named_chunks(client):
    expected = await reference(client)
    await create(client, "anonymous", names=None)
    first = await client.post(
        "/v1/selectors/anonymous/chunks", json={"rows": ROWS[:1].tolist(), "feature_names": NAMES}
    )
    assert first.status_code == 200, first.text
    assert (await described(client, "anonymous"))["has_feature_names"] is True
    names, rows = permuted(["c", "a", "e", "b", "d"])
    second = await client.post(
        "/v1/selectors/anonymous/chunks",
        json={"rows": rows[1:].tolist(), "feature_names": names},
    )
    assert second.status_code == 200, second.text
    np.testing.assert_allclose(await weights(client, "anonymous"), expected, rtol=1e-12)
    top = (await client.get("/v1/selectors/anonymous/top", params={"h": 5})).json()
    assert sorted(f["name"] for f in top["features"]) == NAMES
    other = await client.post(
        "/v1/selectors/anonymous/chunks",
        json={"rows": rows.tolist(), "feature_names": ["v", "w", "x", "y", "z"]},
    )
    assert other.status_code == 422, other.text
    # A positional chunk stays positional.
    plain = await client.post("/v1/selectors/anonymous/chunks", json=ROWS[:1].tolist())
    assert plain.status_code == 200, plain.text


async def test_chunks_racing_to_name_a_selector_agree(client):
    """Two chunks that name the columns in different orders, at once: one names the selector,
    the other is matched to what it named; both land on the right features."""
    expected = await reference(client)
    for trial in range(5):
        name = f"race-{trial}"
        await create(client, name, names=None)
        first, rows_first = permuted(NAMES)
        second, rows_second = permuted(["b", "a", "d", "c", "e"])
        answers = await asyncio.gather(
            client.post(
                f"/v1/selectors/{name}/chunks",
                json={"rows": rows_first[:2].tolist(), "feature_names": first},
            ),
            client.post(
                f"/v1/selectors/{name}/chunks",
                json={"rows": rows_second[2:].tolist(), "feature_names": second},
            ),
        )
        assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
        # Whichever order won, every feature's score is its own.
        assert await scores_by_name(client, name) == pytest.approx(
            dict(zip(NAMES, expected.tolist(), strict=True)), rel=1e-12
        )


async def test_labelled_rows_and_views_match_names_too(client):
    names, rows = permuted(["e", "d", "c", "b", "a"])
    labels = [0, 1, 0]
    for name, body in (
        ("ocfs-ordered", {"rows": ROWS.tolist(), "labels": labels}),
        ("ocfs-named", {"rows": rows.tolist(), "labels": labels, "feature_names": names}),
    ):
        await create(client, name, method="ocfs")
        response = await client.post(f"/v1/selectors/{name}/chunks", json=body)
        assert response.status_code == 200, response.text
    np.testing.assert_allclose(
        await weights(client, "ocfs-named"), await weights(client, "ocfs-ordered"), rtol=1e-12
    )
    labelled_npz = npz(rows=rows, labels=np.array(labels), feature_names=np.array(names))
    response = await client.post(
        "/v1/selectors/ocfs-named/chunks",
        content=labelled_npz,
        headers={"content-type": "application/x-npz"},
    )
    assert response.status_code == 200, response.text

    views = {"a": 2, "b": 3}
    for name, named in (("views-ordered", False), ("views-named", True)):
        created = await client.post(
            "/v1/selectors",
            json={
                "name": name,
                "method": "omvfs",
                "views": views,
                "feature_names": {"a": ["a0", "a1"], "b": ["b0", "b1", "b2"]},
                "params": {"n_clusters": 2, "max_iter": 5},
            },
        )
        assert created.status_code == 201, created.text
        view_b = np.arange(9.0).reshape(3, 3) + 1
        chunk: dict[str, Any] = {"views": {"a": [[1, 2], [3, 4], [5, 6]], "b": view_b.tolist()}}
        if named:
            chunk["views"]["b"] = view_b[:, [2, 0, 1]].tolist()
            chunk["feature_names"] = {"a": ["a0", "a1"], "b": ["b2", "b0", "b1"]}
        response = await client.post(f"/v1/selectors/{name}/chunks", json=chunk)
        assert response.status_code == 200, response.text
    np.testing.assert_allclose(
        await weights(client, "views-named"), await weights(client, "views-ordered"), rtol=1e-9
    )
    wrong = await client.post(
        "/v1/selectors/views-named/chunks",
        json={
            "views": {"a": [[1, 2]], "b": [[1, 2, 3]]},
            "feature_names": {"a": ["a0", "a1"], "b": ["b0", "b1", "bx"]},
        },
    )
    assert wrong.status_code == 422 and "view 'b'" in wrong.json()["detail"], wrong.text


async def test_the_same_rows_named_in_another_order_are_the_same_chunk(client):
    """A retry with the same Idempotency-Key may name the columns in another order: the chunk
    is the same once matched, so it is a duplicate, not an idempotency mismatch."""
    await create(client, "idem")
    headers = {"idempotency-key": "named-once"}
    names, rows = permuted(["b", "a", "c", "e", "d"])
    first = await client.post(
        "/v1/selectors/idem/chunks",
        json={"rows": ROWS.tolist(), "feature_names": NAMES},
        headers=headers,
    )
    again = await client.post(
        "/v1/selectors/idem/chunks",
        json={"rows": rows.tolist(), "feature_names": names},
        headers=headers,
    )
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["duplicate"] is True


def _csr(matrix: sp.csr_matrix) -> dict[str, Any]:
    return {
        "shape": list(matrix.shape),
        "indptr": matrix.indptr.tolist(),
        "indices": matrix.indices.tolist(),
        "data": matrix.data.tolist(),
    }


def _save_npz_with_names(matrix: sp.csr_matrix, names: list[str]) -> bytes:
    """``scipy.sparse.save_npz`` plus a ``feature_names`` array in the same archive."""
    return npz(
        format=np.array(b"csr"),
        shape=np.array(matrix.shape),
        data=matrix.data,
        indices=matrix.indices,
        indptr=matrix.indptr,
        feature_names=np.array(names),
    )


#: A selector without names of WIDE features, and a chunk that names all of them but f2, as a
#: header written for the selector's features (``f0, f1, ...``) would.
WIDE = 6
WITHOUT_F2 = [f"f{i}" for i in range(WIDE) if i != 2]
NPZ = "application/x-npz"


def _short_chunks(names: list[str]) -> list[tuple[str, str, Any, dict[str, str]]]:
    """Every format that names its columns, for every chunk kind: (id, method, body, params),
    the rows one column short of WIDE."""
    rows = np.arange(2.0 * len(names)).reshape(2, len(names)) + 1
    labels = [0, 1]
    csr = sp.csr_matrix(rows)
    return [
        ("csv", "variance", (csv_body(rows, names), "text/csv"), {}),
        ("arrow", "variance", (arrow_rows(rows, names), "application/vnd.apache.arrow.stream"), {}),
        ("json rows", "variance", {"rows": rows.tolist(), "feature_names": names}, {}),
        ("json csr", "variance", {**_csr(csr), "feature_names": names}, {}),
        ("npz rows", "variance", (npz(rows=rows, feature_names=np.array(names)), NPZ), {}),
        ("npz csr", "variance", (_save_npz_with_names(csr, names), NPZ), {}),
        (
            "labelled json",
            "ocfs",
            {"rows": rows.tolist(), "labels": labels, "feature_names": names},
            {},
        ),
        ("labelled json csr", "ocfs", {**_csr(csr), "labels": labels, "feature_names": names}, {}),
        (
            "labelled npz",
            "ocfs",
            (npz(rows=rows, labels=np.array(labels), feature_names=np.array(names)), NPZ),
            {},
        ),
        (
            "labelled csv",
            "ocfs",
            (csv_body(rows, names, labels=labels), "text/csv"),
            {"labels": "class"},
        ),
        ("views", "omvfs", {"views": {"v": rows.tolist()}, "feature_names": {"v": names}}, {}),
    ]


async def _short_chunk_refusal(client, case: str, method: str, body: Any, params, names=None):
    shape: dict[str, Any] = {"n_features": WIDE}
    if method == "omvfs":
        shape = {"views": {"v": WIDE}, "params": {"n_clusters": 2, "max_iter": 5}}
        if names is not None:
            shape["feature_names"] = {"v": names}
    elif names is not None:
        shape["feature_names"] = names
    name = case.replace(" ", "-") + ("-named" if names else "")
    created = await client.post("/v1/selectors", json={"name": name, "method": method, **shape})
    assert created.status_code == 201, created.text
    if isinstance(body, tuple):
        content, media = body
        response = await client.post(
            f"/v1/selectors/{name}/chunks",
            content=content,
            headers={"content-type": media},
            params=params,
        )
    else:
        response = await client.post(f"/v1/selectors/{name}/chunks", json=body, params=params)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"].endswith("selector-mismatch"), problem
    assert (await described(client, name))["version"] == 0  # nothing of it was applied
    return problem["detail"]


@pytest.mark.parametrize(
    ("case", "method", "body", "params"),
    _short_chunks(WITHOUT_F2),
    ids=[c[0] for c in _short_chunks(WITHOUT_F2)],
)
async def test_a_short_named_chunk_says_what_it_lacks_in_every_format(
    client, case, method, body, params
):
    """On a selector without names: the count expected and the count that came, and, as the
    chunk uses the names its answers give the positions, which one is missing. On a named
    selector: the missing name, whatever the format (a CSR's shape is read before its names)."""
    detail = await _short_chunk_refusal(client, case, method, body, params)
    assert f"expected {WIDE} features per row; the chunk names {WIDE - 1} columns (1 fewer)" in (
        detail
    ), detail
    assert "no feature names: its features are its positions, f0 to f5" in detail, detail
    assert "are missing ['f2'], unexpected []; nothing of it was applied" in detail, detail
    if method == "omvfs":
        assert detail.startswith("view 'v': "), detail

    named = [f"f{i}" for i in range(WIDE)]
    detail = await _short_chunk_refusal(client, case, method, body, params, names=named)
    assert "missing ['f2'], unexpected []; nothing of it was applied" in detail, detail


async def test_names_of_its_own_cannot_be_matched_to_positions(client):
    own = ["temp", "rain", "wind", "sun", "snow", "fog", "hail"]  # one more than WIDE
    body = {"rows": [[1.0] * len(own)], "feature_names": own}
    detail = await _short_chunk_refusal(client, "own-names", "variance", body, {})
    assert "the chunk names 7 columns (1 more)" in detail, detail
    assert "which the chunk's names (['temp', 'rain'" in detail, detail
    assert "so no column can be told missing: send all 6 columns" in detail, detail
