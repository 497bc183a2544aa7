"""The ranking history over HTTP: capped, newest first, validated, per view, durable, deleted
with its selector."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

pytestmark = pytest.mark.asyncio


def rows(seed: int, n: int, m: int, low: float = -1.0) -> list[list[float]]:
    values: list[list[float]] = (
        np.random.default_rng(seed).uniform(low, 1.0, (n, m)).round(6).tolist()
    )
    return values


async def create(http: httpx.AsyncClient, body: dict[str, Any]) -> None:
    response = await http.post("/v1/selectors", json=body)
    assert response.status_code == 201, response.text


async def push(http: httpx.AsyncClient, name: str, body: Any, route: str = "chunks") -> Any:
    response = await http.post(f"/v1/selectors/{name}/{route}", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def history(http: httpx.AsyncClient, name: str, **params: Any) -> httpx.Response:
    return await http.get(f"/v1/selectors/{name}/history", params=params)


def without_bands(features: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Top features as the history keeps them: the bands of GET .../top are of that answer."""
    return [{k: v for k, v in feature.items() if k != "band"} for feature in features]


async def test_history_is_capped_newest_first_and_matches_the_rankings(app_factory):
    async with app_factory(history_top=4, history_versions=3) as (_app, http):
        names = [f"v{i}" for i in range(6)]
        await create(
            http, {"name": "s", "method": "variance", "n_features": 6, "feature_names": names}
        )
        tops = {}
        for i in range(5):
            receipt = await push(http, "s", rows(i, 5, 6))
            top = (await http.get("/v1/selectors/s/top", params={"h": 4})).json()
            tops[receipt["version"]] = (receipt["rows_seen"], without_bands(top["features"]))
        response = await history(http, "s", h=4, limit=3)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["name"] == "s" and body["method"] == "variance" and body["h"] == 4
        versions = body["versions"]
        assert [v["version"] for v in versions] == [5, 4, 3]
        for entry in versions:
            rows_seen, features = tops[entry["version"]]
            assert entry["rows_seen"] == rows_seen
            assert entry["top"] == features  # rank, index, name, score as GET .../top has them
            assert entry["updated_at"] > 1.7e9
        shorter = (await history(http, "s", h=2, limit=1)).json()["versions"]
        assert [v["version"] for v in shorter] == [5]
        assert shorter[0]["top"] == tops[5][1][:2]


async def test_h_and_limit_are_validated(app_factory):
    async with app_factory(history_top=4, history_versions=3) as (_app, http):
        await create(http, {"name": "s", "method": "variance", "n_features": 3})
        for params, fragment in (
            ({"h": 5}, "h must be between 1 and 4"),
            ({"limit": 4}, "limit must be between 1 and 3"),
            ({"h": 0}, "h"),  # below 1: the schema says so
            ({"limit": 0}, "limit"),
        ):
            response = await history(http, "s", **params)
            assert response.status_code == 422, (params, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert fragment in response.json()["detail"], response.json()["detail"]
        # Above the configured limits: the schema states them (maxima from the settings).
        assert (await history(http, "s", h=5)).json()["type"].endswith(":invalid-input")
        assert "SIFT_HISTORY_TOP" in (await history(http, "s", h=5)).json()["detail"]
        # Nothing committed yet: no versions.
        assert (await history(http, "s")).json()["versions"] == []
        assert (await history(http, "nope")).status_code == 404


async def test_multi_view_history_ranks_every_view(client):
    await create(
        client,
        {
            "name": "mv",
            "method": "omvfs",
            "views": {"text": 4, "image": 3},
            "params": {"n_clusters": 2, "max_iter": 5},
        },
    )
    body = {"views": {"text": rows(1, 6, 4, 0.0), "image": rows(2, 6, 3, 0.0)}}
    await push(client, "mv", body)
    top = (await client.get("/v1/selectors/mv/top", params={"h": 2})).json()["features"]
    top = without_bands(top)
    (entry,) = (await history(client, "mv", h=2)).json()["versions"]
    assert entry["version"] == 1 and entry["rows_seen"] == 6
    assert [f["view"] for f in entry["top"]] == ["text", "text", "image", "image"]
    assert entry["top"] == top


async def test_feature_streams_count_features_and_name_them_as_they_arrived(client):
    await create(client, {"name": "cols", "method": "ofs", "n_samples": 5})
    await push(
        client,
        "cols",
        {"columns": rows(3, 3, 5), "names": ["age", "bmi", "sbp"]},
        route="features",
    )
    (entry,) = (await history(client, "cols", h=3)).json()["versions"]
    assert entry["features_seen"] == 3 and "rows_seen" not in entry
    assert sorted(f["name"] for f in entry["top"]) == ["age", "bmi", "sbp"]


async def test_history_survives_a_restart_and_goes_with_its_selector(app_factory, redis_client):
    async with app_factory() as (_app, http):
        await create(http, {"name": "d", "method": "variance", "n_features": 3})
        for i in range(2):
            await push(http, "d", rows(i, 4, 3))
        before = (await history(http, "d")).json()
    async with app_factory() as (_app, http):
        after = (await history(http, "d")).json()
        assert after == before and [v["version"] for v in after["versions"]] == [2, 1]
        assert await redis_client.exists("sift:{d}:history") == 1
        assert (await http.delete("/v1/selectors/d")).status_code == 204
        assert await redis_client.exists("sift:{d}:history") == 0
        assert (await history(http, "d")).status_code == 404
        await create(http, {"name": "d", "method": "variance", "n_features": 3})
        assert (await history(http, "d")).json()["versions"] == []


async def test_rejected_chunks_still_make_a_history_entry(app_factory):
    """A version that only moved past a rejected chunk ranks as the one before it."""

    def labelled(classes: list[int]) -> dict[str, Any]:
        labels = [c for c in classes for _ in range(2)]
        return {"rows": [[float(c + j % 3) for j in range(50)] for c in labels], "labels": labels}

    # Room for the scores and a few classes of sums, not for twenty more classes.
    async with app_factory(max_state_bytes=4096) as (_app, http):
        await create(http, {"name": "r", "method": "ocfs", "n_features": 50})
        await push(http, "r", labelled([0, 1]))
        response = await http.post("/v1/selectors/r/chunks", json=labelled(list(range(2, 22))))
        assert response.status_code == 422, response.text
        assert response.json()["type"].endswith("chunk-rejected")
        versions = (await history(http, "r", h=5)).json()["versions"]
        assert [v["version"] for v in versions] == [2, 1]
        assert versions[0]["top"] == versions[1]["top"] and versions[0]["rows_seen"] == 4
