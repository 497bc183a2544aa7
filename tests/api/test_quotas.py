"""Quotas per tenant (an API key's name prefix) against a live app on a real Redis: what one
tenant's admin can make Redis hold is bounded, the refusal names the quota, its limit and what
is used, and a new selector's footprint is what it learned (nothing yet), not what it declared.
"""

from __future__ import annotations

from typing import Any

import httpx

from siftstream import Client, PermissionDeniedError
from tests.support.api import assert_problem
from tests.support.harness import live_service

ROOT_TOKEN = "quota-root"
ROOT = {"authorization": f"Bearer {ROOT_TOKEN}"}


async def key(http: httpx.AsyncClient, prefix: str, headers: dict[str, str]) -> dict[str, str]:
    created = await http.post(
        "/v1/keys", json={"scopes": ["admin"], "prefix": prefix}, headers=headers
    )
    assert created.status_code == 201, created.text
    return {"authorization": f"Bearer {created.json()['key']}"}


async def create(
    http: httpx.AsyncClient, headers: dict[str, str], name: str, **body: Any
) -> httpx.Response:
    document = {"name": name, "method": "variance", "n_features": 4, **body}
    return await http.post("/v1/selectors", json=document, headers=headers)


async def test_a_tenant_holds_at_most_its_selectors_and_the_refusal_says_why(app_factory):
    async with app_factory(api_token=ROOT_TOKEN, tenant_max_selectors=2) as (_app, http):
        tenant = await key(http, "t1-", ROOT)
        for name in ("t1-a", "t1-b"):
            assert (await create(http, tenant, name)).status_code == 201
        refused = await create(http, tenant, "t1-c")
        assert_problem(refused, 403, "tenant 't1-'", "2 selectors")
        problem = refused.json()
        assert problem["type"].endswith("quota-exceeded")
        assert (problem["quota"], problem["limit"], problem["used"]) == ("selectors", 2, 2)
        # A key of a longer prefix, made by the tenant's admin, stays within the tenant.
        sub = await key(http, "t1-x-", tenant)
        assert_problem(await create(http, sub, "t1-x-a"), 403, "tenant 't1-'")
        # The root has no quota; its selectors of the tenant's names count all the same.
        assert (await create(http, ROOT, "t1-root")).status_code == 201
        assert (await create(http, ROOT, "free")).status_code == 201
        # Deleting frees the room at once: usage is counted from what exists.
        for name in ("t1-a", "t1-root"):
            assert (await http.delete(f"/v1/selectors/{name}", headers=ROOT)).status_code == 204
        assert (await create(http, tenant, "t1-c")).status_code == 201


async def test_declared_state_is_bounded_per_tenant(app_factory):
    """A 130-byte request for a variance selector of a million features and 8 resamples
    declares hundreds of MiB: refused for a tenant over its state quota, before any write."""
    settings = {"api_token": ROOT_TOKEN, "tenant_max_state_bytes": 64 * 2**20}
    async with app_factory(**settings) as (_app, http):
        tenant = await key(http, "t2-", ROOT)
        huge = {"n_features": 1_000_000, "params": {"resamples": 8}}
        refused = await create(http, tenant, "t2-huge", **huge)
        assert_problem(refused, 403, "declared state")
        assert refused.json()["quota"] == "state_bytes"
        assert refused.json()["limit"] == 64 * 2**20 and refused.json()["used"] == 0
        assert (await http.get("/v1/selectors/t2-huge", headers=ROOT)).status_code == 404
        small = await create(http, tenant, "t2-small", n_features=1000)
        assert small.status_code == 201, small.text


async def test_a_new_selector_takes_what_it_learned_not_what_it_declared(app_factory, redis_client):
    """The root creates the million-feature, 8-resample variance selector: Redis holds a
    header per array (all zeros) instead of its ~300 MiB, and the first chunk is applied."""
    async with app_factory() as (_app, http):
        before = (await redis_client.info("memory"))["used_memory"]
        answer = await create(http, {}, "wide", n_features=1_000_000, params={"resamples": 8})
        assert answer.status_code == 201, answer.text
        grown = (await redis_client.info("memory"))["used_memory"] - before
        assert grown < 8 * 2**20, grown
        chunk = {
            "shape": [2, 1_000_000],
            "indptr": [0, 2, 3],
            "indices": [0, 999_999, 5],
            "data": [1.0, 2.0, 3.0],
        }
        pushed = await http.post("/v1/selectors/wide/chunks", json=chunk)
        assert pushed.status_code == 200, pushed.text
        top = (await http.get("/v1/selectors/wide/top", params={"h": 3})).json()
        assert {f["index"] for f in top["features"]} == {0, 5, 999_999}


async def test_the_root_sets_a_tenants_quotas_and_tenants_read_their_own(app_factory):
    settings = {"api_token": ROOT_TOKEN, "tenant_max_selectors": 1, "tenant_max_alerts": 1}
    async with app_factory(**settings) as (_app, http):
        tenant = await key(http, "t3-", ROOT)
        other = await key(http, "t4-", ROOT)
        assert (await create(http, tenant, "t3-a")).status_code == 201
        assert_problem(await create(http, tenant, "t3-b"), 403, "1 selectors")
        # A tenant may not raise its own quota, nor read another's.
        raise_own = await http.put("/v1/quotas/t3-", json={"selectors": 5}, headers=tenant)
        assert_problem(raise_own, 403, "without a name prefix")
        assert_problem(await http.get("/v1/quotas/t3-", headers=other), 403)
        raised = await http.put("/v1/quotas/t3-", json={"selectors": 3}, headers=ROOT)
        assert raised.status_code == 200, raised.text
        assert raised.json()["limits"]["selectors"] == 3
        assert raised.json()["limits"]["alerts"] == 1  # not given: the default
        assert (await create(http, tenant, "t3-b")).status_code == 201
        own = (await http.get("/v1/quotas/t3-", headers=tenant)).json()
        assert own["used"]["selectors"] == 2 and own["used"]["state_bytes"] > 0
        # Alerts: one for the tenant in all, whichever selector.
        hook = {"url": "https://hooks.example.invalid/x", "threshold": 0.5}
        first = await http.post("/v1/selectors/t3-a/alerts", json=hook, headers=tenant)
        assert first.status_code == 201, first.text
        second = await http.post("/v1/selectors/t3-b/alerts", json=hook, headers=tenant)
        assert_problem(second, 403, "1 alerts")
        # Back to the defaults.
        reset = await http.put("/v1/quotas/t3-", json={}, headers=ROOT)
        assert reset.json()["limits"]["selectors"] == 1


async def test_streams_are_counted_per_tenant(app_factory):
    async with app_factory(api_token=ROOT_TOKEN, tenant_max_streams=1) as (_app, http):
        tenant = await key(http, "t5-", ROOT)
        body = {"n_features": 4}
        made = await http.post("/v1/streams", json={"name": "t5-s", **body}, headers=tenant)
        assert made.status_code == 201, made.text
        refused = await http.post("/v1/streams", json={"name": "t5-t", **body}, headers=tenant)
        assert_problem(refused, 403, "1 streams")


async def test_sources_are_counted_per_tenant(app_factory):
    async with app_factory(
        api_token=ROOT_TOKEN, tenant_max_sources=1, source_private="127.0.0.1"
    ) as (_app, http):
        tenant = await key(http, "t7-", ROOT)
        assert (await create(http, tenant, "t7-v")).status_code == 201
        body = {"kind": "redis-stream", "url": "redis://127.0.0.1:1", "key": "k"}
        into = {"selector": "t7-v"}
        made = await http.post(
            "/v1/sources", json={"name": "t7-a", "into": into, **body}, headers=tenant
        )
        assert made.status_code == 201, made.text
        refused = await http.post(
            "/v1/sources", json={"name": "t7-b", "into": into, **body}, headers=tenant
        )
        assert_problem(refused, 403, "1 sources")
        used = (await http.get("/v1/quotas/t7-", headers=tenant)).json()["used"]
        assert used["sources"] == 1


def test_the_client_reads_and_sets_quotas(tmp_path):
    """The Python client against a live service: the root sets, the tenant reads its own."""
    env = {"SIFT_API_TOKEN": ROOT_TOKEN, "SIFT_TENANT_MAX_SELECTORS": "1"}
    with live_service(tmp_path, "quotas", env) as service:
        with Client(service.url, api_key=ROOT_TOKEN) as root:
            created = root.create_key(["admin"], prefix="t6-")
            assert root.set_quota("t6-", selectors=2).limits["selectors"] == 2
        with Client(service.url, api_key=created.key) as tenant:
            tenant.create("t6-a", "variance", n_features=3)
            tenant.create("t6-b", "variance", n_features=3)
            mine = tenant.quota("t6-")
            assert mine.used["selectors"] == 2 and mine.limits["selectors"] == 2
            try:
                tenant.create("t6-c", "variance", n_features=3)
            except PermissionDeniedError as exc:
                assert "2 selectors" in str(exc)
            else:
                raise AssertionError("a third selector was created over the quota")
