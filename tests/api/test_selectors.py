"""Selector lifecycle and the read side, through HTTP against the real app and Redis."""

from __future__ import annotations

import asyncio
import io
import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms import METHODS
from service.algorithms.fsds import FSDS
from tests.support.api import create_selector, csr_json, npy_bytes, npz_bytes

pytestmark = pytest.mark.asyncio


async def test_probes_and_docs(client):
    assert (await client.get("/v1/healthz")).json() == {"status": "ok"}
    ready = await client.get("/v1/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/selectors/{name}/chunks" in spec["paths"]
    create_body = spec["paths"]["/v1/selectors"]["post"]["requestBody"]["content"]
    documented = create_body["application/json"]
    methods = [shape["properties"]["method"]["const"] for shape in documented["schema"]["oneOf"]]
    # Every method twice: with a shape of its own, and attached to a stream (which gives it).
    assert sorted(methods) == sorted([*METHODS, *METHODS])
    attached = [shape for shape in documented["schema"]["oneOf"] if "stream" in shape["required"]]
    assert sorted(shape["properties"]["method"]["const"] for shape in attached) == sorted(METHODS)
    assert documented["examples"]["fsds"]["value"]["method"] == "fsds"
    assert (await client.get("/docs")).status_code == 200


async def test_create_echoes_resolved_params(client):
    response = await client.post(
        "/v1/selectors", json={"name": "news", "method": "fsds", "n_features": 4862}
    )
    assert response.status_code == 201
    assert response.headers["location"] == "/v1/selectors/news"
    body = response.json()
    assert body["name"] == "news" and body["method"] == "fsds" and body["n_features"] == 4862
    assert body["version"] == 0 and body["rows_seen"] == 0
    params = body["params"]
    assert params["k"] == 10
    assert params["ell"] == max(math.ceil(math.sqrt(4862)), params["k"] + 1) == 70
    assert params["alpha_exponent"] == 3
    assert params["normalize_rows"] is True


async def test_list_describe_delete(client):
    await create_selector(client, "a", 5)
    await create_selector(client, "b", 7, feature_names=[f"w{i}" for i in range(7)])
    listed = (await client.get("/v1/selectors")).json()["selectors"]
    assert [s["name"] for s in listed] == ["a", "b"]
    described = (await client.get("/v1/selectors/b")).json()
    assert described["n_features"] == 7 and described["has_feature_names"] is True
    assert described["state"]["pending_entries"] == 0
    assert (await client.delete("/v1/selectors/a")).status_code == 204
    assert (await client.get("/v1/selectors/a")).status_code == 404
    assert [s["name"] for s in (await client.get("/v1/selectors")).json()["selectors"]] == ["b"]


async def test_chunks_in_every_format_match_the_library(client):
    """Each format lands as the same rows; the served weights equal an in-process FSDS run."""
    m = 12
    created = await create_selector(client, "mix", m, params={"k": 3, "ell": 6})
    rng = np.random.default_rng(0)
    chunks = [rng.standard_normal((9, m)) for _ in range(3)]
    chunks.append(sp.random(8, m, density=0.3, random_state=1, format="csr"))
    chunks.append(sp.random(10, m, density=0.3, random_state=2, format="csr"))
    # The keyword arguments of each POST: a JSON body, or content with its media type.
    bodies: list[dict[str, Any]] = [
        {"json": {"rows": chunks[0].tolist()}},
        {"content": npy_bytes(chunks[1]), "headers": {"content-type": "application/x-npy"}},
        {"json": chunks[2].tolist()},
        {"json": csr_json(chunks[3])},
        {"content": npz_bytes(chunks[4]), "headers": {"content-type": "application/x-npz"}},
    ]
    rows_seen = 0
    for version, body in enumerate(bodies, start=1):
        response = await client.post("/v1/selectors/mix/chunks", **body)
        assert response.status_code == 200, response.text
        rows_seen += chunks[version - 1].shape[0]
        assert response.json()["version"] == version
        assert response.json()["rows_seen"] == rows_seen
        assert response.json()["duplicate"] is False

    method = FSDS()
    params = method.resolve_params(created["params"], m, stored=True)
    state = method.initial_state(params)
    for chunk in chunks:
        state = method.update(state, params, chunk)
    served = (await client.get("/v1/selectors/mix/weights")).json()
    assert served["version"] == 5 and served["rows_seen"] == rows_seen
    np.testing.assert_allclose(served["weights"], method.weights(state, params), rtol=1e-10)

    npy = await client.get("/v1/selectors/mix/weights", headers={"accept": "application/x-npy"})
    assert npy.headers["content-type"] == "application/x-npy"
    weights = np.load(io.BytesIO(npy.content), allow_pickle=False)
    np.testing.assert_array_equal(weights, served["weights"])


async def test_top_ranks_by_score_with_names(client):
    names = [f"term{i}" for i in range(20)]
    await create_selector(client, "t", 20, feature_names=names, params={"k": 2})
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((40, 20)) * np.linspace(0.1, 3, 20)
    assert (await client.post("/v1/selectors/t/chunks", json=rows.tolist())).status_code == 200
    top = (await client.get("/v1/selectors/t/top", params={"h": 5})).json()
    weights = np.array((await client.get("/v1/selectors/t/weights")).json()["weights"])
    assert top["version"] == 1 and top["rows_seen"] == 40 and top["name"] == "t"
    expected = np.argsort(-weights, kind="stable")[:5]
    assert [f["index"] for f in top["features"]] == expected.tolist()
    assert [f["rank"] for f in top["features"]] == [1, 2, 3, 4, 5]
    assert [f["name"] for f in top["features"]] == [names[i] for i in expected]
    assert [f["score"] for f in top["features"]] == pytest.approx(weights[expected].tolist())
    everything = (await client.get("/v1/selectors/t/top", params={"h": 500})).json()
    assert len(everything["features"]) == 20
    assert (await client.get("/v1/selectors/t/top", params={"h": 0})).status_code == 422


async def test_weights_not_acceptable(client):
    await create_selector(client, "w", 4)
    response = await client.get("/v1/selectors/w/weights", headers={"accept": "text/csv"})
    assert response.status_code == 406
    assert response.headers["content-type"] == "application/problem+json"


async def test_metrics_count_chunks(client):
    await create_selector(client, "m", 3)
    await client.post("/v1/selectors/m/chunks", json=[[1.0, 2.0, 3.0]])
    text = (await client.get("/metrics")).text
    assert 'sift_chunks_accepted_total{method="fsds"} 1.0' in text
    assert 'sift_rows_applied_total{method="fsds"} 1.0' in text


async def test_api_token_required_when_configured(app_factory):
    async with app_factory(api_token="s3cret") as (_, http):
        assert (await http.get("/v1/healthz")).status_code == 200
        denied = await http.get("/v1/selectors")
        assert denied.status_code == 401
        assert denied.headers["content-type"] == "application/problem+json"
        allowed = await http.get("/v1/selectors", headers={"authorization": "Bearer s3cret"})
        assert allowed.status_code == 200


async def test_a_selector_created_to_expire_is_deleted_once_idle(app_factory, redis_client):
    """``expires_after``: deleted once that long without a commit (by any replica's expiry
    pass), never while chunks keep coming, never while one is pending."""
    async with app_factory(sweep_interval_seconds=0.05) as (_app, http):
        for name in ("brief", "busy", "forever"):
            body = {"name": name, "method": "variance", "n_features": 2}
            if name != "forever":
                body["expires_after"] = 1
            created = await http.post("/v1/selectors", json=body)
            assert created.status_code == 201, created.text
        assert created.json().get("expires_after") is None
        assert (await http.get("/v1/selectors/brief")).json()["expires_after"] == 1.0
        deadline = asyncio.get_running_loop().time() + 1.8
        while asyncio.get_running_loop().time() < deadline:  # busy keeps committing
            posted = await http.post("/v1/selectors/busy/chunks", json=[[1.0, 2.0]])
            assert posted.status_code == 200, posted.text
            await asyncio.sleep(0.2)
        assert (await http.get("/v1/selectors/brief")).status_code == 404
        assert (await http.get("/v1/selectors/busy")).status_code == 200
        await asyncio.sleep(1.5)
        assert (await http.get("/v1/selectors/busy")).status_code == 404
        assert (await http.get("/v1/selectors/forever")).status_code == 200
        names = [s["name"] for s in (await http.get("/v1/selectors")).json()["selectors"]]
        assert names == ["forever"]
        assert await redis_client.zcard("sift:expiring") == 0


async def test_an_expiry_never_deletes_a_selector_written_since(client, store):
    await client.post(
        "/v1/selectors",
        json={"name": "raced", "method": "variance", "n_features": 2, "expires_after": 3600},
    )
    idle_since = (await store.registry.get_head("raced")).updated_at
    await client.post("/v1/selectors/raced/chunks", json=[[1.0, 2.0]])
    assert await store.registry.delete("raced", idle_since=idle_since) is False
    assert (await client.get("/v1/selectors/raced")).status_code == 200


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ({"expires_after": 0}, "between 1 and"),
        ({"expires_after": 10**9}, "between 1 and"),
        ({"expires_after": "1h"}, "number of seconds"),
        ({"expires_after": 60, "partitions": 2, "method": "ocfs"}, "without partitions"),
    ],
)
async def test_expires_after_is_checked(client, extra, fragment):
    body = {"name": "x", "method": "variance", "n_features": 2, **extra}
    response = await client.post("/v1/selectors", json=body)
    assert response.status_code == 422 and fragment in response.json()["detail"], response.text
