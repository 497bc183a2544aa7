"""API keys with scopes and name prefixes, checked before any body is read."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from service.cli import exposure_problem, is_loopback
from service.store.api_keys import digest
from tests.support.api import make_settings, running_app

pytestmark = pytest.mark.asyncio

ADMIN_TOKEN = "bootstrap-admin-token"
BOOTSTRAP = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def new_key(http, scopes: list[str], prefix: str = "", headers=BOOTSTRAP) -> dict[str, Any]:
    response = await http.post(
        "/v1/keys", json={"scopes": scopes, "prefix": prefix, "label": "test"}, headers=headers
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def assert_problem(response, status: int, fragment: str = "") -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert fragment in response.json()["detail"], response.json()["detail"]


@pytest.fixture
async def secured(app_factory):
    async with app_factory(api_token=ADMIN_TOKEN) as (_app, http):
        yield http


async def test_keys_are_shown_once_and_stored_hashed(secured, redis_client):
    created = await new_key(secured, ["read"])
    assert created["key"].startswith("sift_") and created["scopes"] == ["read"]
    listed = (await secured.get("/v1/keys", headers=BOOTSTRAP)).json()["keys"]
    assert listed == [{k: v for k, v in created.items() if k != "key"}]
    stored = await redis_client.hgetall(f"sift:apikey:{created['id']}")
    secret = created["key"].rsplit("_", 1)[1]
    assert secret.encode() not in b"".join(stored.values())
    assert stored[b"secret_sha256"] == digest(secret).encode()


async def test_scopes(secured):
    reader = bearer((await new_key(secured, ["read"]))["key"])
    writer = bearer((await new_key(secured, ["write"]))["key"])
    admin = bearer((await new_key(secured, ["admin"]))["key"])

    create = {"name": "s", "method": "fsds", "n_features": 3}
    assert_problem(await secured.post("/v1/selectors", json=create, headers=reader), 403, "admin")
    assert_problem(await secured.post("/v1/selectors", json=create, headers=writer), 403, "admin")
    assert (await secured.post("/v1/selectors", json=create, headers=admin)).status_code == 201

    chunk = [[1.0, 2.0, 3.0]]
    assert_problem(
        await secured.post("/v1/selectors/s/chunks", json=chunk, headers=reader), 403, "write"
    )
    assert (
        await secured.post("/v1/selectors/s/chunks", json=chunk, headers=writer)
    ).status_code == 200
    for headers in (reader, writer, admin):
        assert (await secured.get("/v1/selectors/s/top", headers=headers)).status_code == 200
    assert_problem(await secured.delete("/v1/selectors/s", headers=writer), 403, "admin")
    assert_problem(await secured.get("/v1/keys", headers=writer), 403, "admin")
    assert (await secured.get("/v1/keys", headers=admin)).status_code == 200
    assert (await secured.delete("/v1/selectors/s", headers=admin)).status_code == 204


async def test_unknown_missing_and_odd_tokens_are_401(secured):
    for headers in (
        {},
        {"authorization": "Bearer nope"},
        {"authorization": "Basic " + ADMIN_TOKEN},
        {"authorization": "Bearer sift_0123456789abcdef_" + "0" * 48},
        {"authorization": "Bearer " + ADMIN_TOKEN + "x"},
        {"authorization": "Bearer h\u00e9llo-\u00fc".encode()},  # not ASCII: compared as bytes
    ):
        assert_problem(await secured.get("/v1/selectors", headers=headers), 401)
    assert (await secured.get("/v1/healthz")).status_code == 200
    assert (await secured.get("/v1/readyz")).status_code == 200


async def test_revocation_is_immediate_on_every_replica(redis_url, redis_client):
    settings = make_settings(redis_url, api_token=ADMIN_TOKEN)
    async with running_app(settings) as (_, one), running_app(settings) as (_, two):
        key = await new_key(one, ["read"])
        assert (await two.get("/v1/selectors", headers=bearer(key["key"]))).status_code == 200
        assert (await one.delete(f"/v1/keys/{key['id']}", headers=BOOTSTRAP)).status_code == 204
        assert_problem(await two.get("/v1/selectors", headers=bearer(key["key"])), 401)
        assert_problem(await one.delete(f"/v1/keys/{key['id']}", headers=BOOTSTRAP), 404)


async def test_prefix_keys_see_only_their_selectors(secured):
    team = bearer((await new_key(secured, ["admin"], "team-a-"))["key"])
    for name in ("team-a-one", "team-b-one"):
        body = {"name": name, "method": "ocfs", "n_features": 2}
        assert (
            await secured.post("/v1/selectors", json=body, headers=BOOTSTRAP)
        ).status_code == 201
    listed = (await secured.get("/v1/selectors", headers=team)).json()["selectors"]
    assert [s["name"] for s in listed] == ["team-a-one"]
    assert_problem(await secured.get("/v1/selectors/team-b-one", headers=team), 404, "team-b-one")
    assert_problem(
        await secured.post("/v1/selectors/team-b-one/chunks", json=[[1, 2]], headers=team), 404
    )
    assert_problem(await secured.delete("/v1/selectors/team-b-one", headers=team), 404)
    refused = await secured.post(
        "/v1/selectors",
        json={"name": "team-b-two", "method": "fsds", "n_features": 2},
        headers=team,
    )
    assert_problem(refused, 403, "team-a-")
    body = {"name": "team-a-two", "method": "ocfs", "n_features": 2}
    assert (await secured.post("/v1/selectors", json=body, headers=team)).status_code == 201
    rows = {"rows": [[1.0, 2.0]], "labels": [0]}
    for name in ("team-a-one", "team-b-one"):
        pushed = await secured.post(f"/v1/selectors/{name}/chunks", json=rows, headers=BOOTSTRAP)
        assert pushed.status_code == 200, pushed.text
    # A merge reads its source: both selectors must be visible to the key.
    merge_b = await secured.post(
        "/v1/selectors/team-a-two/merge", json={"from": "team-b-one"}, headers=team
    )
    assert_problem(merge_b, 404, "team-b-one")
    merge_a = await secured.post(
        "/v1/selectors/team-a-two/merge", json={"from": "team-a-one"}, headers=team
    )
    assert merge_a.status_code == 200, merge_a.text
    # Keys: a prefixed admin manages only keys within its prefix.
    assert_problem(
        await secured.post("/v1/keys", json={"scopes": ["read"], "prefix": ""}, headers=team), 403
    )
    sub = await new_key(secured, ["read"], "team-a-x", headers=team)
    other = await new_key(secured, ["read"], "team-b-")
    ids = {k["id"] for k in (await secured.get("/v1/keys", headers=team)).json()["keys"]}
    assert sub["id"] in ids and other["id"] not in ids
    assert_problem(await secured.delete(f"/v1/keys/{other['id']}", headers=team), 404)


async def test_authentication_comes_before_the_body_is_read(app_factory):
    async with app_factory(api_token=ADMIN_TOKEN, max_json_body_bytes=10_000) as (_, http):
        read: list[int] = []

        async def endless():
            for _ in range(100_000):
                read.append(1)
                yield b" " * 1000

        response = await http.post(
            "/v1/selectors", content=endless(), headers={"content-type": "application/json"}
        )
        assert_problem(response, 401)
        assert len(read) <= 1
        # Authenticated, a body over the JSON limit is refused without reading it all.
        read.clear()
        response = await http.post(
            "/v1/selectors",
            content=endless(),
            headers={"content-type": "application/json", **BOOTSTRAP},
        )
        assert_problem(response, 413, "10000 bytes")
        assert len(read) < 20


async def test_keys_need_authentication_to_be_on(client):
    response = await client.post("/v1/keys", json={"scopes": ["read"]})
    assert_problem(response, 409, "SIFT_API_TOKEN")


async def test_metrics_token(app_factory):
    async with app_factory(metrics_token="m-token") as (_, http):
        assert_problem(await http.get("/metrics"), 401)
        assert (await http.get("/metrics", headers=bearer("m-token"))).status_code == 200


async def test_metrics_need_a_key_once_keys_are_on(secured):
    """With SIFT_API_TOKEN set and no metrics token, /metrics is not open: it names every
    selector. The token, an admin key or a metrics key without a prefix reads it."""
    await secured.post(
        "/v1/selectors",
        json={"name": "team-b-secret", "method": "fsds", "n_features": 3},
        headers=BOOTSTRAP,
    )
    assert_problem(await secured.get("/metrics"), 401)
    reader = bearer((await new_key(secured, ["read"]))["key"])
    assert_problem(await secured.get("/metrics", headers=reader), 403, "metrics")
    prefixed = bearer((await new_key(secured, ["admin"], prefix="team-a-"))["key"])
    assert_problem(await secured.get("/metrics", headers=prefixed), 403, "prefix")
    scraper = bearer((await new_key(secured, ["metrics"]))["key"])
    for allowed in (BOOTSTRAP, scraper, bearer((await new_key(secured, ["admin"]))["key"])):
        answer = await secured.get("/metrics", headers=allowed)
        assert answer.status_code == 200, answer.text
    # A metrics key reads nothing else.
    assert_problem(await secured.get("/v1/selectors", headers=scraper), 403, "read")


async def test_sift_serve_refuses_a_public_address_without_a_key():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIFT_")}
    done = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--host", "0.0.0.0", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--allow-unauthenticated" in done.stderr and "SIFT_API_TOKEN" in done.stderr


async def test_serving_beyond_loopback_needs_a_key_or_an_explicit_choice():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    assert exposure_problem("127.0.0.1", None, False) is None
    assert "SIFT_API_TOKEN" in (exposure_problem("0.0.0.0", None, False) or "")
    assert exposure_problem("0.0.0.0", "token", False) is None
    assert exposure_problem("0.0.0.0", None, True) is None


@pytest.mark.parametrize(
    "env, reason",
    [
        ({"SIFT_REDIS_SERVER": "/nonexistent/redis-server"}, "is not an executable file"),
        ({"SIFT_REDIS_URL": "redis://:secret@127.0.0.1:1/0"}, "does not answer"),
    ],
)
async def test_a_failed_start_says_why_in_one_line(tmp_path, env, reason):
    """No traceback for a reason Sift knows: one line naming it, exit status 1 (and no
    password in it)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SIFT_")}
    clean.update(SIFT_DATA_DIR=str(tmp_path / "data"), **env)
    done = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--port", "1", "--log-level", "warning"],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("sift serve:")]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and reason in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "secret" not in done.stderr, done.stderr
