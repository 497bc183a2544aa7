"""Regressions of hostile requests that used to answer 500, break responses or exhaust memory."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from service.store.codec import encode_state
from service.store.keys import SelectorKeys
from service.store.records import Entry, SelectorMeta
from service.store.redis_store import SelectorStore
from tests.support.api import create_selector

pytestmark = pytest.mark.asyncio


def assert_problem(response, status: int, *fragments: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    for fragment in fragments:
        assert fragment in problem["detail"], problem["detail"]
    return problem


async def test_names_must_match_whole(client):
    for name in ("h-fsds\n", "a\nb", "x\r", "ok "):
        body = {"name": name, "method": "fsds", "n_features": 3}
        assert_problem(await client.post("/v1/selectors", json=body), 422, "selector name")
    assert (await client.get("/v1/selectors")).json()["selectors"] == []
    views = {"name": "v", "method": "omvfs", "views": {"a\n": 2}}
    assert_problem(await client.post("/v1/selectors", json=views), 422, "view names")


async def test_chunk_status_of_a_malformed_or_unknown_log_id(client):
    await create_selector(client, "s", 3)
    assert_problem(await client.get("/v1/selectors/s/chunks/garbage"), 422, "log_id")
    assert_problem(await client.get("/v1/selectors/s/chunks/1-2-3"), 422, "log_id")
    assert_problem(await client.get("/v1/selectors/s/chunks/99999999999999-0"), 404, "no chunk")
    posted = await client.post("/v1/selectors/s/chunks", json=[[1, 2, 3]])
    status = await client.get(f"/v1/selectors/s/chunks/{posted.json()['log_id']}")
    assert status.json()["status"] == "applied" and status.json()["applied"] is True


async def test_validation_errors_with_huge_integers_are_422(client):
    big = 1234567890123456789012345678901234
    for body in ({"name": big}, {"name": "x", "method": "fsds", "n_features": big}):
        assert_problem(await client.post("/v1/selectors", json=body), 422)
    response = await client.post(
        "/v1/selectors",
        content=b'{"name": "x", "method": "fsds", "n_features": ' + str(big).encode() + b"}",
        headers={"content-type": "application/json"},
    )
    assert_problem(response, 422, "n_features")


async def test_control_bodies_must_be_json(client):
    response = await client.post(
        "/v1/selectors", content=b"name=x", headers={"content-type": "text/plain"}
    )
    assert_problem(response, 415, "application/json")
    deep = b"[" * 5000 + b"]" * 5000
    response = await client.post(
        "/v1/selectors", content=deep, headers={"content-type": "application/json"}
    )
    assert_problem(response, 400, "JSON")


async def test_method_not_allowed_lists_every_method_of_the_path(client):
    response = await client.put("/v1/selectors/x")
    assert_problem(response, 405)
    assert response.headers["allow"] == "DELETE, GET"
    response = await client.patch("/v1/selectors")  # DELETE deletes by prefix
    assert response.headers["allow"] == "DELETE, GET, POST"


async def test_a_5xx_carries_no_internal_text(client, redis_client, caplog):
    await create_selector(client, "broken", 3)
    # Storage damage the service cannot work around: the description no longer parses.
    await redis_client.set(SelectorKeys("sift", "broken").meta, b"{not json at all")
    response = await client.get("/v1/selectors/broken")
    problem = assert_problem(response, 500)
    assert "parse" not in problem["detail"] and "json" not in problem["detail"].lower()
    assert problem["error_id"] in problem["detail"]
    assert any(problem["error_id"] in record.getMessage() for record in caplog.records)
    # The connection survives a 500: the next request on the same client is answered.
    assert (await client.get("/v1/healthz")).status_code == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"method": "fsds", "n_features": 10**7}, "sketch_rows"),
        ({"method": "fsds", "n_features": 100, "params": {"ell": 10**9}}, "sketch_rows"),
        (
            {
                "method": "fsds",
                "n_features": 100,
                "params": {"kernel": "gaussian", "kernel_components": 10**9},
            },
            "sketch_rows",
        ),
        ({"method": "ioc", "n_features": 10**7, "params": {"n_components": 10**7}}, "vectors"),
        ({"method": "omvfs", "views": {"a": 1000}, "params": {"n_clusters": 10**9}}, "'A'"),
        ({"method": "ofs", "n_samples": 10**5, "params": {"ridge": 1.0}}, "cholesky"),
    ],
)
async def test_creation_refuses_states_that_would_not_fit(client, body, fragment):
    problem = assert_problem(
        await client.post("/v1/selectors", json={"name": "big", **body}),
        422,
        fragment,
        "SIFT_MAX_STATE_BYTES",
        str(2**30),
    )
    assert problem["type"] == "urn:sift:problem:state-too-large"
    assert (await client.get("/v1/selectors")).json()["selectors"] == []


async def test_idempotency_records_are_bounded_per_selector(redis_client):
    store = SelectorStore(redis_client, idempotency_max_records=3)
    await create_selector_in(store, "s")
    outcomes = [
        await store.log.append("s", Entry(b"p%d" % i, 1, f"d{i}", f"key-{i}")) for i in range(5)
    ]
    kept = await redis_client.zrange(SelectorKeys("sift", "s").idems, 0, -1)
    assert len(kept) == 3
    idem_keys = [k async for k in redis_client.scan_iter(match="sift:{s}:idem:*")]
    assert len(idem_keys) == 3
    # The newest keys are still recognised; the oldest was forgotten (a retry is a new chunk).
    again = await store.log.append("s", Entry(b"p4", 1, "d4", "key-4"))
    assert again.duplicate and again.log_id == outcomes[4].log_id
    forgotten = await store.log.append("s", Entry(b"p0", 1, "d0", "key-0"))
    assert not forgotten.duplicate


async def create_selector_in(store: SelectorStore, name: str) -> None:
    meta = SelectorMeta(name, "fsds", {}, 0.0, n_features=3)
    await store.registry.create(meta, encode_state({"x": np.zeros(1)}))


async def test_idempotency_keys_are_visible_ascii(client):
    await create_selector(client, "s", 3)
    for key in (" ", "a b", "x" * 257):
        response = await client.post(
            "/v1/selectors/s/chunks", json=[[1, 2, 3]], headers={"idempotency-key": key}
        )
        assert_problem(response, 422, "idempotency-key")
    response = await client.post(
        "/v1/selectors/s/chunks", json=[[1, 2, 3]], headers={"idempotency-key": "batch-0001"}
    )
    assert response.status_code == 200


async def test_a_client_that_leaves_mid_body_is_no_internal_error(app_factory, caplog):
    """A disconnect while the body is read is logged at INFO as the client's doing (499 in the
    access log and metrics), never as an internal error with a traceback."""
    async with app_factory() as (app, http):
        await http.post("/v1/selectors", json={"name": "gone", "method": "fsds", "n_features": 3})
        messages: list[dict[str, Any]] = [
            {"type": "http.request", "body": b"[[1, 2", "more_body": True},
            {"type": "http.disconnect"},
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/selectors/gone/chunks",
            "raw_path": b"/v1/selectors/gone/chunks",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1234),
            "server": ("sift", 80),
        }
        with caplog.at_level(logging.INFO):
            await app(scope, receive, send)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert starts and starts[0]["status"] == 499, sent
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "client went away" in caplog.text
