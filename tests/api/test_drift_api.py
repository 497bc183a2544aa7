"""Drift over HTTP: the top h against the previous version and the baseline (set by the monitor
once a version's ranking is stable, or pinned), per selector and per incarnation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import numpy as np

from service.algorithms.agreement import rank_biased_overlap
from service.algorithms.drift import compare
from service.store.monitoring_records import Baseline, HistoryEntry, RankedList
from tests.support.api import assert_problem, wait_for

FEATURES = 12
NAMES = [f"x{i}" for i in range(FEATURES)]
#: Features 0-4 vary most, clearly apart; the rest is noise of one scale.
SCALE = np.array([6.0, 5.0, 4.0, 3.0, 2.5] + [1.0] * 7)
ADMIN_TOKEN = "drift-admin"


async def create(http: httpx.AsyncClient, name: str = "s", **extra: Any) -> None:
    body = {"name": name, "method": "variance", "n_features": FEATURES, "feature_names": NAMES}
    response = await http.post("/v1/selectors", json={**body, **extra})
    assert response.status_code == 201, response.text


async def push(http: httpx.AsyncClient, name: str, x: np.ndarray, **headers: str) -> None:
    response = await http.post(
        f"/v1/selectors/{name}/chunks", json={"rows": x.tolist()}, headers=headers
    )
    assert response.status_code == 200, response.text


async def drift(http: httpx.AsyncClient, name: str = "s", h: int = 5) -> dict[str, Any]:
    response = await http.get(f"/v1/selectors/{name}/drift", params={"h": h})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_drift_compares_the_top_h_with_the_previous_version(client):
    await create(client)
    empty = await drift(client)
    assert empty == {
        "name": "s", "method": "variance", "h": 5, "version": 0, "previous": None, "baseline": None,
        "baseline_rule": {"h": 10, "threshold": 0.75},
    }  # fmt: skip
    first = np.zeros((4, FEATURES))
    first[:, :5] = [[1, 2, 3, 4, 5], [-1, -2, -3, -4, -5], [1, 2, 3, 4, 5], [-1, -2, -3, -4, -5]]
    await push(client, "s", first)  # variance ranks x4, x3, x2, x1, x0
    second = np.zeros((4, FEATURES))
    second[:, 7:] = 40 * np.array([[1, 2, 3, 4, 5], [-1, -2, -3, -4, -5]] * 2)
    await push(client, "s", second)  # now x11, x10, x9, x8, x7 lead
    answer = await drift(client)
    assert answer["version"] == 2 and answer["rows_seen"] == 8
    previous = answer["previous"]
    assert previous["version"] == 1 and previous["rows_seen"] == 4
    assert previous["jaccard"] == 0.0 and previous["rbo"] == 0.0 and previous["drift"] == 1.0
    assert [f["name"] for f in previous["entered"]] == ["x11", "x10", "x9", "x8", "x7"]
    assert [f["name"] for f in previous["left"]] == ["x4", "x3", "x2", "x1", "x0"]
    assert previous["entered"][0]["index"] == 11
    # A shallower comparison of the same versions.
    two = (await drift(client, h=2))["previous"]
    assert [f["name"] for f in two["left"]] == ["x4", "x3"]


async def test_without_a_baseline_the_rule_says_its_h_and_where_the_newest_version_stands(client):
    """The rule judges the top 10 (or an alert's smaller h), whatever h the answer is about;
    the stability beside it is of that h: the history's top 10, or the current state's."""
    await create(client)
    rng = np.random.default_rng(3)
    await push(client, "s", rng.standard_normal((400, FEATURES)) * SCALE)
    await wait_for(lambda: _version_at_least(client, 1))
    rule = (await drift(client, h=3))["baseline_rule"]
    top10 = (await client.get("/v1/selectors/s/top", params={"h": 10})).json()["stability"]
    assert rule == {"h": 10, "threshold": 0.75, "stability": top10["index"]}
    assert rule["stability"] < 0.75  # seven of the twelve features are noise of one scale
    hook = {"url": "http://hooks.example.invalid/x", "h": 4, "threshold": 0.9}
    assert (await client.post("/v1/selectors/s/alerts", json=hook)).status_code == 201
    rule = (await drift(client, h=3))["baseline_rule"]
    top4 = (await client.get("/v1/selectors/s/top", params={"h": 4})).json()["stability"]
    assert rule["h"] == 4 and rule["stability"] == top4["index"]


async def _version_at_least(client: httpx.AsyncClient, version: int) -> bool:
    return bool((await drift(client))["version"] >= version)


async def test_the_first_stable_version_becomes_the_baseline_then_pins_and_forgets(client):
    await create(client)
    rng = np.random.default_rng(0)
    # One row: the resamples cannot say anything yet, so no version is stable.
    await push(client, "s", rng.standard_normal((1, FEATURES)) * SCALE)
    await asyncio.sleep(0.2)
    assert (await drift(client))["baseline"] is None
    # An alert on the top 5 makes the baseline depend on the top 5's stability (10 of 12
    # features would never be stable here: seven of them are noise of one scale).
    hook = {"url": "http://hooks.example.invalid/x", "h": 5, "threshold": 0.9}
    assert (await client.post("/v1/selectors/s/alerts", json=hook)).status_code == 201
    for _ in range(15):
        await push(client, "s", rng.standard_normal((500, FEATURES)) * SCALE)
        await asyncio.sleep(0.05)
        if (await drift(client))["baseline"] is not None:
            break
    answer = await drift(client)
    found = answer["baseline"]
    assert found is not None and found["how"] == "auto"
    assert "baseline_rule" not in answer  # the rule is said only while there is no baseline
    top = (await client.get("/v1/selectors/s/top", params={"h": 5})).json()
    # The baseline was stable when chosen: its top 5 is the current one's.
    assert found["jaccard"] == 1.0 and top["stability"]["index"] >= 0.75
    automatic = found["version"]
    await push(client, "s", rng.standard_normal((500, FEATURES)) * SCALE)
    assert (await drift(client))["baseline"]["version"] == automatic  # set once

    pinned = await client.post("/v1/selectors/s/baseline")
    assert pinned.status_code == 200, pinned.text
    body = pinned.json()
    assert body["how"] == "pinned" and body["version"] == automatic + 1
    assert body["rows_seen"] == (await client.get("/v1/selectors/s")).json()["rows_seen"]
    assert (await drift(client))["baseline"]["version"] == automatic + 1

    assert (await client.delete("/v1/selectors/s/baseline")).status_code == 204
    assert (await drift(client))["baseline"] is None
    await push(client, "s", rng.standard_normal((500, FEATURES)) * SCALE)

    async def automatic_again() -> bool:
        found = (await drift(client))["baseline"]
        return found is not None and found["how"] == "auto"

    await wait_for(automatic_again)


async def test_a_pin_needs_a_version_and_h_is_bounded(client):
    await create(client)
    assert_problem(await client.post("/v1/selectors/s/baseline"), 409, "no version")
    assert_problem(await client.get("/v1/selectors/s/drift", params={"h": 101}), 422, "100")
    assert_problem(await client.get("/v1/selectors/s/drift", params={"h": 0}), 422)
    assert_problem(await client.get("/v1/selectors/nope/drift"), 404, "nope")
    assert_problem(await client.post("/v1/selectors/nope/baseline"), 404, "nope")


async def test_partitioned_selectors_have_no_drift_of_their_own(client):
    await create(client, name="p", partitions=2)
    assert_problem(await client.get("/v1/selectors/p/drift"), 422, "partitioned")
    assert_problem(await client.post("/v1/selectors/p/baseline"), 422, "partitioned")
    assert_problem(
        await client.post("/v1/selectors/p/alerts", json={"url": "http://a/b", "threshold": 0.5}),
        422,
        "partitioned",
    )


async def test_a_name_created_again_does_not_inherit_the_baseline(client, store):
    await create(client)
    await push(client, "s", np.random.default_rng(1).standard_normal((50, FEATURES)) * SCALE)
    assert (await client.post("/v1/selectors/s/baseline")).status_code == 200
    old = await store.registry.get_meta("s")
    hook = {"url": "http://hooks.example.invalid/x", "threshold": 0.5}
    assert (await client.post("/v1/selectors/s/alerts", json=hook)).status_code == 201
    assert (await client.delete("/v1/selectors/s")).status_code == 204
    await create(client)
    assert (await drift(client))["baseline"] is None
    assert (await client.get("/v1/selectors/s/alerts")).json()["alerts"] == []
    await push(client, "s", np.random.default_rng(2).standard_normal((3, FEATURES)))
    # A monitor of the earlier selector, late: its baseline is not written into the new one.
    entry = HistoryEntry(1, 50, 0.0, [RankedList(None, [0, 1, 2], [3.0, 2.0, 1.0])])
    stale = Baseline(entry, "auto", 0.0, old.incarnation)
    assert not await store.monitoring.set_baseline("s", stale, pin=False)
    assert not await store.monitoring.set_baseline("s", stale, pin=True)
    assert (await drift(client))["baseline"] is None


async def test_pinning_and_alerts_need_the_admin_scope(app_factory):
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    async with app_factory(api_token=ADMIN_TOKEN) as (_app, http):
        created = await http.post(
            "/v1/keys", json={"scopes": ["write"], "label": "producer"}, headers=admin
        )
        writer = {"authorization": f"Bearer {created.json()['key']}"}
        response = await http.post(
            "/v1/selectors",
            json={"name": "s", "method": "variance", "n_features": FEATURES},
            headers=admin,
        )
        assert response.status_code == 201
        await push(http, "s", np.ones((3, FEATURES)), **writer)
        assert (await http.get("/v1/selectors/s/drift", headers=writer)).status_code == 200
        assert (await http.get("/v1/selectors/s/alerts", headers=writer)).status_code == 200
        hook = {"url": "http://hooks.example.invalid/x", "threshold": 0.5}
        for method, path, body in [
            ("POST", "/v1/selectors/s/baseline", None),
            ("DELETE", "/v1/selectors/s/baseline", None),
            ("POST", "/v1/selectors/s/alerts", hook),
            ("DELETE", "/v1/selectors/s/alerts/0123456789abcdef", None),
        ]:
            refused = await http.request(method, path, json=body, headers=writer)
            assert_problem(refused, 403, "admin")
        assert (await http.post("/v1/selectors/s/baseline", headers=admin)).status_code == 200


def test_drift_is_one_minus_the_rank_biased_overlap() -> None:
    """What the answers call drift (service.algorithms.drift.Comparison)."""
    before = [RankedList(None, [1, 2, 3, 4], [4.0, 3.0, 2.0, 1.0])]
    after = [RankedList(None, [2, 1, 3, 9], [4.0, 3.0, 2.0, 1.0])]
    moved = compare(before, after, 4)
    assert moved.rbo == rank_biased_overlap([1, 2, 3, 4], [2, 1, 3, 9])
    assert moved.drift == 1.0 - moved.rbo and moved.jaccard == 3 / 5
    assert moved.entered == [(None, 9)] and moved.left == [(None, 4)]
