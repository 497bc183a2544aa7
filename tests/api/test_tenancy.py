"""A quota binds every name under its prefix, whichever key created it, against a live ``sift
serve`` on a real Redis: a tenant's admin cannot leave its quotas by making a key of a longer
prefix and revoking its own (at any depth), every quota set on a prefix enclosing a name binds
that name's creation, and a quota set after the names exist holds from the next creation on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.harness import ServiceProcess, live_service

ROOT_TOKEN = "tenancy-root"
ROOT = {"authorization": f"Bearer {ROOT_TOKEN}"}
#: The default selectors per tenant of this process (small, so that the defaults bind too).
DEFAULT_SELECTORS = 4


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {"SIFT_API_TOKEN": ROOT_TOKEN, "SIFT_TENANT_MAX_SELECTORS": str(DEFAULT_SELECTORS)}
    with live_service(Path(tmp_path_factory.mktemp("tenancy")), "tenancy", env) as service:
        yield service


@pytest.fixture
def http(live: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


def key(http: httpx.Client, prefix: str, by: dict[str, str]) -> tuple[str, dict[str, str]]:
    """A new admin key of ``prefix`` made by ``by``: its id and its header."""
    made = http.post("/v1/keys", json={"scopes": ["admin"], "prefix": prefix}, headers=by)
    assert made.status_code == 201, made.text
    return made.json()["id"], {"authorization": f"Bearer {made.json()['key']}"}


def create(http: httpx.Client, name: str, by: dict[str, str]) -> httpx.Response:
    body = {"name": name, "method": "variance", "n_features": 2}
    return http.post("/v1/selectors", json=body, headers=by)


def refused_by(answer: httpx.Response, tenant: str, quota: str = "selectors") -> None:
    assert answer.status_code == 403, answer.text
    problem = answer.json()
    assert problem["type"].endswith("quota-exceeded"), problem
    assert (problem["tenant"], problem["quota"]) == (tenant, quota), problem


def held(http: httpx.Client, prefix: str) -> int:
    listed = http.get("/v1/selectors", params={"prefix": prefix, "limit": 1000}, headers=ROOT)
    assert listed.status_code == 200, listed.text
    return len(listed.json()["selectors"])


def set_quota(http: httpx.Client, tenant: str, **limits: int) -> None:
    answer = http.put(f"/v1/quotas/{tenant}", json=limits, headers=ROOT)
    assert answer.status_code == 200, answer.text


def test_a_chain_of_keys_each_revoking_its_maker_stays_within_the_quota(http):
    """The attack as found: a quota of 3 on ``ta-``; the tenant makes 3, makes a key of
    ``ta-x-``, revokes its own; that key is refused, and so is every key down the chain."""
    set_quota(http, "ta-", selectors=3)
    key_id, current = key(http, "ta-", ROOT)
    prefix = "ta-"
    for depth in range(4):
        for i in range(3):
            answer = create(http, f"{prefix}s{i}", current)
            if depth == 0:
                assert answer.status_code == 201, answer.text
            else:
                refused_by(answer, "ta-")
        next_id, following = key(http, f"{prefix}x-", current)
        assert http.delete(f"/v1/keys/{key_id}", headers=current).status_code == 204
        assert http.get("/v1/selectors", headers=current).status_code == 401  # revoked
        key_id, current, prefix = next_id, following, f"{prefix}x-"
    refused_by(create(http, f"{prefix}last", current), "ta-")
    assert held(http, "ta-") == 3
    # The last key of the chain reads the quota that binds it, and what it counts.
    quota = http.get("/v1/quotas/ta-", headers=current)
    assert quota.status_code == 200, quota.text
    assert quota.json()["used"]["selectors"] == 3 and quota.json()["limits"]["selectors"] == 3


def test_the_default_quota_follows_the_chain_too(http):
    """Without a quota set, the tenant's default (``SIFT_TENANT_MAX_SELECTORS``) binds the
    whole chain: the revoked maker's tenant stays the home of the keys it made."""
    key_id, current = key(http, "tb-", ROOT)
    for i in range(DEFAULT_SELECTORS):
        assert create(http, f"tb-s{i}", current).status_code == 201
    prefix = "tb-"
    for _ in range(3):
        next_id, following = key(http, f"{prefix}x-", current)
        assert http.delete(f"/v1/keys/{key_id}", headers=current).status_code == 204
        key_id, current, prefix = next_id, following, f"{prefix}x-"
        refused_by(create(http, f"{prefix}s", current), "tb-")
    assert held(http, "tb-") == DEFAULT_SELECTORS
    # Nor does the chain escape its tenant's other quotas: streams, set to one.
    set_quota(http, "tb-", streams=1)
    made = http.post("/v1/streams", json={"name": f"{prefix}st", "n_features": 2}, headers=current)
    assert made.status_code == 201, made.text
    again = http.post(
        "/v1/streams", json={"name": f"{prefix}st2", "n_features": 2}, headers=current
    )
    refused_by(again, "tb-", "streams")


def test_every_enclosing_quota_binds_whichever_key_creates(http):
    """Nested prefixes: a quota set on ``tc-x-`` binds names under it made by the tenant's key
    (``tc-``) and by a key the root made for ``tc-x-y-``; the tenant's own quota binds both
    as well; names outside ``tc-x-`` are bound by ``tc-``'s alone."""
    set_quota(http, "tc-", selectors=4)
    set_quota(http, "tc-x-", selectors=2)
    _, tenant = key(http, "tc-", ROOT)
    _, deeper = key(http, "tc-x-y-", ROOT)
    assert create(http, "tc-x-a", tenant).status_code == 201
    assert create(http, "tc-x-y-a", deeper).status_code == 201
    refused_by(create(http, "tc-x-b", tenant), "tc-x-")
    refused_by(create(http, "tc-x-y-b", deeper), "tc-x-")
    assert create(http, "tc-a", tenant).status_code == 201
    assert create(http, "tc-b", tenant).status_code == 201
    refused_by(create(http, "tc-c", tenant), "tc-")
    # The root makes what it likes (the operator), and its names count for both.
    assert create(http, "tc-x-root", ROOT).status_code == 201
    set_quota(http, "tc-", selectors=10)
    refused_by(create(http, "tc-x-y-c", deeper), "tc-x-")
    assert create(http, "tc-c", tenant).status_code == 201
    # The deeper key reads the quotas that bind it, not another tenant's.
    assert http.get("/v1/quotas/tc-x-", headers=deeper).status_code == 200
    assert http.get("/v1/quotas/tc-", headers=deeper).status_code == 200
    assert http.get("/v1/quotas/ta-", headers=deeper).status_code == 403


def test_a_quota_set_after_the_names_exist_binds_the_next_creation(http):
    """Lowering deletes nothing; it refuses what would add more, for a tenant and for a
    prefix within it, and room comes back as names are deleted."""
    _, tenant = key(http, "td-", ROOT)
    for name in ("td-a", "td-x-a", "td-x-b"):
        assert create(http, name, tenant).status_code == 201
    set_quota(http, "td-x-", selectors=1)
    refused_by(create(http, "td-x-c", tenant), "td-x-")
    assert create(http, "td-b", tenant).status_code == 201
    set_quota(http, "td-", selectors=3)
    refused_by(create(http, "td-c", tenant), "td-")
    assert held(http, "td-") == 4
    for name in ("td-x-a", "td-x-b"):
        assert http.delete(f"/v1/selectors/{name}", headers=tenant).status_code == 204
    assert create(http, "td-x-c", tenant).status_code == 201
    refused_by(create(http, "td-x-d", tenant), "td-")


def test_alerts_are_bound_by_the_quota_of_their_selectors_names(http):
    set_quota(http, "te-", alerts=1)
    key_id, tenant = key(http, "te-", ROOT)
    assert create(http, "te-x-a", tenant).status_code == 201
    _, sub = key(http, "te-x-", tenant)
    assert http.delete(f"/v1/keys/{key_id}", headers=tenant).status_code == 204
    hook = {"url": "https://hooks.example.invalid/x", "threshold": 0.5}
    assert http.post("/v1/selectors/te-x-a/alerts", json=hook, headers=sub).status_code == 201
    refused_by(http.post("/v1/selectors/te-x-a/alerts", json=hook, headers=sub), "te-", "alerts")


async def test_concurrent_creations_from_two_keys_of_one_tenant_take_the_last_room(live):
    """Two keys of one tenant (the tenant's and one it made) creating at once, one room left:
    exactly one creation is admitted (checked one at a time in a process)."""
    with httpx.Client(base_url=live.url, timeout=30) as http:
        set_quota(http, "tf-", selectors=3)
        _, tenant = key(http, "tf-", ROOT)
        _, sub = key(http, "tf-x-", tenant)
        assert create(http, "tf-a", tenant).status_code == 201
        assert create(http, "tf-x-a", sub).status_code == 201
    body = {"method": "variance", "n_features": 2}
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
        answers = await asyncio.gather(
            *(
                client.post(
                    "/v1/selectors",
                    json={"name": f"{prefix}c{i}", **body},
                    headers=headers,
                )
                for i in range(6)
                for prefix, headers in (("tf-", tenant), ("tf-x-", sub))
            )
        )
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [201] + [403] * 11, [a.text for a in answers if a.status_code != 403]
    with httpx.Client(base_url=live.url, timeout=30) as http:
        assert held(http, "tf-") == 3
