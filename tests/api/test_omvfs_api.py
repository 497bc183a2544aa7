"""OMVFS selectors over HTTP: multi-view chunks in, per-view rankings out, bad views refused."""

from __future__ import annotations

import io
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms.omvfs import OMVFS
from tests.support.api import csr_json, wait_for

pytestmark = pytest.mark.asyncio

VIEWS = {"text": 30, "image": 8}
NAMES = {"text": [f"w{i}" for i in range(30)], "image": [f"c{i}" for i in range(8)]}
PARAMS = {"n_clusters": 3, "max_iter": 20, "seed": 4}


def chunk(rows: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    return sp.random(rows, 30, density=0.3, random_state=rng, format="csr"), rng.random((rows, 8))


def npz_views(text: Any, image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, text=np.asarray(text.toarray()), image=image)
    return buffer.getvalue()


async def create_omvfs(http: httpx.AsyncClient, name: str = "mv") -> dict[str, Any]:
    response = await http.post(
        "/v1/selectors",
        json={
            "name": name,
            "method": "omvfs",
            "views": VIEWS,
            "feature_names": NAMES,
            "params": PARAMS,
        },
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def reference(
    chunks: list[tuple[sp.csr_matrix, np.ndarray]], extra: dict[str, Any] | None = None
) -> np.ndarray:
    method = OMVFS()
    params = method.resolve_params({"views": VIEWS, **PARAMS, **(extra or {})}, 38)
    state = method.initial_state(params)
    for text, image in chunks:
        state = method.update(state, params, sp.hstack([text, sp.csr_matrix(image)], "csr"))
    return method.weights(state, params)


async def test_chunks_of_every_view_give_the_library_rankings(client):
    created = await create_omvfs(client)
    assert created["views"] == VIEWS and created["n_features"] == 38
    assert created["params"]["views"] == VIEWS and created["params"]["gamma"] == "auto"
    assert created["params"]["score"] == "explained"
    assert created["params"]["neighbours"] == 10 and created["params"]["tol"] == 1e-3
    chunks = [chunk(25, seed) for seed in range(4)]
    for i, (text, image) in enumerate(chunks):
        if i % 2:
            response = await client.post(
                "/v1/selectors/mv/chunks?wait=false",
                content=npz_views(text, image),
                headers={"content-type": "application/x-npz"},
            )
        else:
            response = await client.post(
                "/v1/selectors/mv/chunks?wait=false",
                json={"views": {"text": csr_json(text), "image": image.tolist()}},
            )
        assert response.status_code in (200, 202), response.text

    async def applied() -> bool:
        return bool((await client.get("/v1/selectors/mv")).json()["rows_seen"] == 100)

    await wait_for(applied)
    described = (await client.get("/v1/selectors/mv")).json()
    # Never coalesced: the buffer holds chunks as sent, one version each.
    assert described["version"] == 4 and described["state"]["chunks_seen"] == 4
    weights = reference(chunks)
    served = (await client.get("/v1/selectors/mv/weights")).json()["weights"]
    np.testing.assert_allclose(served, weights, rtol=1e-9, atol=1e-12)

    top = (await client.get("/v1/selectors/mv/top?h=5&view=image")).json()
    order = np.lexsort((np.arange(8), -weights[30:]))[:5]
    assert [f["index"] for f in top["features"]] == order.tolist()
    assert [f["name"] for f in top["features"]] == [f"c{i}" for i in order]
    assert {f["view"] for f in top["features"]} == {"image"}
    grouped = (await client.get("/v1/selectors/mv/top?h=3")).json()["features"]
    assert [f["view"] for f in grouped] == ["text"] * 3 + ["image"] * 3
    assert [f["rank"] for f in grouped] == [1, 2, 3, 1, 2, 3]
    text_order = np.lexsort((np.arange(30), -weights[:30]))[:3]
    assert [f["index"] for f in grouped[:3]] == text_order.tolist()


async def test_the_papers_ranking_on_request(client):
    """``score: "paper"`` and ``gamma: 1e7`` are echoed and serve the paper's ranking (the row
    norms of V), which differs from the default one on the same chunks."""
    paper = {"score": "paper", "gamma": 1e7}
    response = await client.post(
        "/v1/selectors",
        json={"name": "paper", "method": "omvfs", "views": VIEWS, "params": {**PARAMS, **paper}},
    )
    assert response.status_code == 201, response.text
    assert response.json()["params"]["score"] == "paper"
    assert response.json()["params"]["gamma"] == 1e7
    chunks = [chunk(25, seed) for seed in range(3)]
    for text, image in chunks:
        body = {"views": {"text": csr_json(text), "image": image.tolist()}}
        response = await client.post("/v1/selectors/paper/chunks", json=body)
        assert response.status_code == 200, response.text
    served = (await client.get("/v1/selectors/paper/weights")).json()["weights"]
    expected = reference(chunks, paper)
    np.testing.assert_allclose(served, expected, rtol=1e-9, atol=1e-12)
    assert not np.allclose(expected, reference(chunks))


async def test_bad_multi_view_chunks_are_rejected_and_change_nothing(client):
    await create_omvfs(client, "bad")
    text, image = chunk(6, 1)
    good = {"text": csr_json(text), "image": image.tolist()}
    assert (await client.post("/v1/selectors/bad/chunks", json={"views": good})).status_code == 200
    negative = image.copy()
    negative[2, 5] = -0.25
    nan = image.copy()
    nan[1, 1] = np.nan
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"json": {"views": {"text": good["text"]}}}, 422, "missing ['image']"),
        ({"json": {"views": {**good, "audio": [[1.0]]}}}, 422, "unexpected ['audio']"),
        (
            {"json": {"views": {**good, "image": image[:4].tolist()}}},
            422,
            "same rows; got row counts {'text': 6, 'image': 4}",
        ),
        (
            {"json": {"views": {**good, "image": negative.tolist()}}},
            422,
            "view 'image' must be nonnegative (NMF); got -0.25 at row 2, column 5",
        ),
        (
            {"json": {"views": {**good, "image": image[:, :7].tolist()}}},
            422,
            "view 'image': expected 8 features per row; got 7",
        ),
        (
            {
                "content": npz_views(text, nan),
                "headers": {"content-type": "application/x-npz"},
            },
            422,
            "view 'image': values must be finite",
        ),
        ({"json": {"text": good["text"]}}, 422, '{"views"'),
        (
            {"content": b"\x93NUMPY", "headers": {"content-type": "application/x-npy"}},
            415,
            "multi-view chunk",
        ),
    ]
    for kwargs, status, detail in cases:
        response = await client.post("/v1/selectors/bad/chunks", **kwargs)
        assert response.status_code == status, (kwargs.keys(), response.text)
        assert detail in response.json()["detail"], response.json()["detail"]
    described = (await client.get("/v1/selectors/bad")).json()
    assert described["rows_seen"] == 6 and described["state"]["pending_entries"] == 0
    wrong_view = await client.get("/v1/selectors/bad/top?view=audio")
    assert wrong_view.status_code == 422 and "unknown view 'audio'" in wrong_view.text


async def test_invalid_multi_view_creation(client):
    cases: list[tuple[dict[str, Any], str]] = [
        ({"method": "omvfs"}, 'expected "views"'),
        ({"method": "omvfs", "views": {"a": 0}}, "views['a'] must be between 1"),
        ({"method": "omvfs", "views": {"a b": 3}}, "view names must be"),
        ({"method": "omvfs", "views": VIEWS, "n_features": 38}, "takes views, not n_features"),
        ({"method": "fsds", "n_features": 3, "views": {"a": 3}}, "views apply to multi-view"),
        (
            {"method": "omvfs", "views": VIEWS, "feature_names": {"text": NAMES["text"]}},
            "a list for every view",
        ),
        (
            {"method": "omvfs", "views": VIEWS, "feature_names": {**NAMES, "image": ["x"] * 8}},
            "'x' appears more than once",
        ),
        ({"method": "omvfs", "views": VIEWS, "params": {"alpha": {"text": 1}}}, "every view"),
        ({"method": "omvfs", "views": VIEWS, "params": {"score": "norm"}}, "score must be one"),
        ({"method": "omvfs", "views": VIEWS, "params": {"gamma": "big"}}, "or 'auto'"),
    ]
    for body, detail in cases:
        response = await client.post("/v1/selectors", json={"name": "x", **body})
        assert response.status_code == 422, (body, response.text)
        assert detail in response.json()["detail"], response.json()["detail"]
    fsds = await client.post("/v1/selectors", json={"name": "f", "method": "fsds", "n_features": 3})
    assert fsds.status_code == 201
    answer = await client.get("/v1/selectors/f/top?view=text")
    assert answer.status_code == 422 and "has no views" in answer.json()["detail"]
