"""Selectors by the thousand: the ``temporary`` mark, listings filtered on the server
(``prefix``, ``q``, ``method``, ``temporary``) and ``DELETE /v1/selectors?prefix=``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from service.store import inventory

ADMIN = {"authorization": "Bearer root-token"}


async def make(http: Any, names: list[str], headers: dict[str, str] | None = None, **body: Any):
    """Create ``names`` (variance over 2 features), 32 requests at a time."""
    gate = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with gate:
            created = await http.post(
                "/v1/selectors",
                json={"name": name, "method": "variance", "n_features": 2, **body},
                headers=headers,
            )
            assert created.status_code == 201, created.text

    await asyncio.gather(*(one(n) for n in names))


async def names_of(http: Any, headers: dict[str, str] | None = None, **params: Any) -> list[str]:
    """Every name of a filtered listing, following ``next``."""
    found: list[str] = []
    after = None
    while True:
        query = {**params, **({} if after is None else {"after": after})}
        answer = await http.get("/v1/selectors", params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        found.extend(s["name"] for s in answer.json()["selectors"])
        after = answer.json()["next"]
        if after is None:
            return found


async def test_temporary_is_stored_answered_and_checked(client: Any) -> None:
    await make(client, ["job-1"], temporary=True)
    await make(client, ["kept-1"], temporary=False)
    await make(client, ["plain-1"])
    assert (await client.get("/v1/selectors/job-1")).json()["temporary"] is True
    for name in ("kept-1", "plain-1"):  # absent unless set: answers stay as they were
        assert "temporary" not in (await client.get(f"/v1/selectors/{name}")).json()
    listed = (await client.get("/v1/selectors")).json()["selectors"]
    assert [s.get("temporary") for s in listed] == [True, None, None]
    refused = await client.post(
        "/v1/selectors",
        json={"name": "x", "method": "variance", "n_features": 2, "temporary": "yes"},
    )
    assert refused.status_code == 422 and "temporary" in refused.json()["detail"]
    body = (await client.get("/openapi.json")).json()["paths"]["/v1/selectors"]
    shapes = body["post"]["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert all(s["properties"]["temporary"]["type"] == "boolean" for s in shapes[:1])


async def test_listings_filter_on_the_server(client: Any, monkeypatch: Any) -> None:
    await make(client, [f"gs-{i:02d}" for i in range(12)], temporary=True)
    await make(client, ["Faces-main", "news-main", "gs-kept"])
    await client.post(
        "/v1/selectors", json={"name": "news-ocfs", "method": "ocfs", "n_features": 2}
    )
    assert await names_of(client, q="MAIN") == ["Faces-main", "news-main"]
    assert await names_of(client, prefix="news-") == ["news-main", "news-ocfs"]
    assert await names_of(client, method="ocfs") == ["news-ocfs"]
    assert await names_of(client, temporary="false") == [
        "Faces-main",
        "gs-kept",
        "news-main",
        "news-ocfs",
    ]
    assert await names_of(client, temporary="true", limit=5) == [f"gs-{i:02d}" for i in range(12)]
    assert await names_of(client, prefix="gs-", temporary="false") == ["gs-kept"]
    # A filter that reads descriptions looks at a bounded number per page: short pages with a
    # next, never a lost selector.
    monkeypatch.setattr(inventory, "MAX_SCANNED", 1)
    monkeypatch.setattr(inventory, "_BATCH", 4)
    first = (await client.get("/v1/selectors", params={"method": "ocfs"})).json()
    assert first["selectors"] == [] and first["next"] is not None
    assert await names_of(client, method="ocfs") == ["news-ocfs"]
    for params in ({"q": "a b"}, {"prefix": "x" * 129}, {"temporary": "maybe"}):
        assert (await client.get("/v1/selectors", params=params)).status_code == 422


async def test_delete_by_prefix_in_one_request(client: Any) -> None:
    """250 selectors of a grid search go in one request (deleted side by side on the server);
    the others stay."""
    await make(client, [f"gs-{i:03d}" for i in range(250)], temporary=True)
    await make(client, ["gs", "gsx-1", "keep-1"])
    started = time.perf_counter()
    answer = await client.delete("/v1/selectors", params={"prefix": "gs-"})
    took = time.perf_counter() - started
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"deleted": [f"gs-{i:03d}" for i in range(250)], "next": None}
    assert took < 10, f"deleting 250 selectors took {took:.1f} s"
    print(f"deleted 250 selectors in {took:.2f} s")
    assert await names_of(client) == ["gs", "gsx-1", "keep-1"]
    assert (await client.get("/v1/selectors/gs-007")).status_code == 404
    nothing = await client.delete("/v1/selectors", params={"prefix": "gs-"})
    assert nothing.json() == {"deleted": [], "next": None}


async def test_delete_by_prefix_pages_and_filters(client: Any) -> None:
    await make(client, [f"t-{i}" for i in range(7)], temporary=True)
    await make(client, ["t-kept"])
    first = (await client.delete("/v1/selectors", params={"prefix": "t-", "limit": 3})).json()
    assert first == {"deleted": ["t-0", "t-1", "t-2"], "next": "t-2"}
    rest = await client.delete(
        "/v1/selectors", params={"prefix": "t-", "temporary": "true", "after": first["next"]}
    )
    assert rest.json() == {"deleted": ["t-3", "t-4", "t-5", "t-6"], "next": None}
    assert await names_of(client) == ["t-kept"]


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({}, "needs a prefix"),
        ({"prefix": ""}, "needs a prefix"),
        ({"prefix": "a", "all": "true"}, "not both"),
        ({"prefix": "a b"}, "expected letters"),
        ({"prefix": "a", "limit": 1001}, "1000"),
    ],
)
async def test_a_delete_without_a_prefix_is_refused(
    client: Any, params: dict[str, Any], fragment: str
) -> None:
    await make(client, ["a-1"])
    answer = await client.delete("/v1/selectors", params=params)
    assert answer.status_code == 422 and fragment in answer.text, answer.text
    assert await names_of(client) == ["a-1"]


async def test_keys_delete_only_what_they_see(app_factory: Any) -> None:
    async with app_factory(api_token="root-token") as (_, http):
        await make(http, ["a-1", "a-2", "b-1", "b-2"], ADMIN)

        async def key(scopes: list[str], prefix: str) -> dict[str, str]:
            made = await http.post(
                "/v1/keys", json={"scopes": scopes, "prefix": prefix}, headers=ADMIN
            )
            return {"authorization": f"Bearer {made.json()['key']}"}

        team_a = await key(["admin"], "a-")
        reader = await key(["read"], "")
        refused = await http.delete("/v1/selectors", params={"prefix": "a-"}, headers=reader)
        assert refused.status_code == 403
        others = await http.delete("/v1/selectors", params={"prefix": "b-"}, headers=team_a)
        assert others.json() == {"deleted": [], "next": None}
        mine = await http.delete("/v1/selectors", params={"all": "true"}, headers=team_a)
        assert mine.json() == {"deleted": ["a-1", "a-2"], "next": None}
        assert await names_of(http, ADMIN) == ["b-1", "b-2"]
        everything = await http.delete("/v1/selectors", params={"all": "true"}, headers=ADMIN)
        assert everything.json()["deleted"] == ["b-1", "b-2"]
