"""``GET /v1/selectors?limit=&after=``: pages sorted by name, ``next`` chaining them, a key's
prefix filtering before paging."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import create_selector

NAMES = ["a-1", "a-2", "b-1", "a-3", "b-2", "a-4", "c"]


async def walk(http: Any, limit: int, headers: dict[str, str] | None = None) -> list[list[str]]:
    """Every page, following ``next``."""
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        response = await http.get("/v1/selectors", params=params, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"selectors", "next"}
        pages.append([selector["name"] for selector in body["selectors"]])
        after = body["next"]
        if after is None:
            return pages
        assert after == pages[-1][-1]
        assert len(pages) <= len(NAMES), "next never ends"


async def test_pages_follow_each_other_in_name_order(client: Any) -> None:
    for name in NAMES:
        await create_selector(client, name, 3)
    assert await walk(client, 3) == [["a-1", "a-2", "a-3"], ["a-4", "b-1", "b-2"], ["c"]]
    assert await walk(client, 7) == [sorted(NAMES)]
    assert await walk(client, 1) == [[name] for name in sorted(NAMES)]
    whole = (await client.get("/v1/selectors")).json()
    assert [s["name"] for s in whole["selectors"]] == sorted(NAMES) and whole["next"] is None
    # The answer keeps every field a selector had before paging.
    first = whole["selectors"][0]
    assert {"name", "method", "n_features", "params", "version", "rows_seen"} <= set(first)
    after_last = (await client.get("/v1/selectors", params={"after": "zzz"})).json()
    assert after_last == {"selectors": [], "next": None}
    between = (await client.get("/v1/selectors", params={"after": "a-35", "limit": 2})).json()
    assert [s["name"] for s in between["selectors"]] == ["a-4", "b-1"]
    assert between["next"] == "b-1"


async def test_a_deleted_selector_leaves_no_hole_in_a_page(client: Any) -> None:
    for name in NAMES:
        await create_selector(client, name, 3)
    assert (await client.delete("/v1/selectors/a-2")).status_code == 204
    page = (await client.get("/v1/selectors", params={"limit": 2})).json()
    assert [s["name"] for s in page["selectors"]] == ["a-1", "a-3"]


async def test_a_prefixed_key_pages_through_its_own_selectors(app_factory: Any) -> None:
    admin = {"authorization": "Bearer root-token"}
    async with app_factory(api_token="root-token") as (_, http):
        for name in NAMES:
            created = await http.post(
                "/v1/selectors",
                json={"name": name, "method": "fsds", "n_features": 3},
                headers=admin,
            )
            assert created.status_code == 201, created.text
        created = await http.post(
            "/v1/keys", json={"scopes": ["read"], "prefix": "b-"}, headers=admin
        )
        team = {"authorization": f"Bearer {created.json()['key']}"}
        pages = await walk(http, 1, team)
        everything = await walk(http, 4, admin)
    # Full pages of what the key sees: the prefix filters before the limit applies.
    assert pages == [["b-1"], ["b-2"]]
    assert everything == [sorted(NAMES)[:4], sorted(NAMES)[4:]]


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"after": "no spaces"}]
)
async def test_bad_paging_parameters_are_a_422(client: Any, params: dict[str, Any]) -> None:
    response = await client.get("/v1/selectors", params=params)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"


async def test_the_list_is_documented_with_its_parameters(client: Any) -> None:
    spec = (await client.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/selectors"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["limit"]["schema"]["default"] == 100
    assert parameters["limit"]["schema"]["maximum"] == 1000
    assert "pattern" in parameters["after"]["schema"]["anyOf"][0]
    listed = spec["components"]["schemas"]["SelectorList"]["properties"]
    assert set(listed) == {"selectors", "next", "unreadable"}
